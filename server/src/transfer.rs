//! `treeline export` and `treeline import`: a run's spans out of a server as JSON
//! lines (docs/api.md §8.12), and back into any server through its ingest API.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use treeline_client::{Client, ClientError};
use treeline_wire::{routes, ExportedAnnotation, ExportedSpan, RunUpsert, ANNOTATION_FORMAT};

use crate::failure::{Context, Failure, Outcome};

/// A batch is sent at this many events, or at this many bytes of JSON.
const BATCH_EVENTS: usize = 1000;
const BATCH_BYTES: usize = 4 << 20;
/// Problems listed one by one; past this only counted.
const PROBLEMS_SHOWN: usize = 20;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The run to export.
    #[arg(long = "run")]
    pub run_id: String,
    /// Only this trace.
    #[arg(long = "trace")]
    pub trace_id: Option<String>,
    /// A trace filter as in the trace list, such as `attr.reward < 0.5` or
    /// `error_count > 0`. Repeat for several; all must hold.
    #[arg(long)]
    pub filter: Vec<String>,
    /// Search text, as in the trace list.
    #[arg(long)]
    pub q: Option<String>,
    /// Only traces of this step.
    #[arg(long)]
    pub step: Option<u64>,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// A file of exported spans, one JSON object a line; `-` reads standard input.
    pub file: PathBuf,
    /// Put every span into this run instead of the run named on its line.
    #[arg(long = "run")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(clap::Args)]
pub struct ServerArgs {
    /// The server's address.
    #[arg(long, env = "TREELINE_URL", default_value = "http://127.0.0.1:3000")]
    pub url: String,
    /// API key, sent as `Authorization: Bearer <key>`.
    #[arg(long, env = "TREELINE_API_KEY")]
    pub api_key: Option<String>,
}

impl ServerArgs {
    fn client(&self) -> Client {
        Client::new(&self.url).with_api_key(self.api_key.clone())
    }
}

pub async fn export(args: ExportArgs) -> Outcome {
    let mut query = form_urlencoded::Serializer::new(String::new());
    if let Some(t) = &args.trace_id {
        query.append_pair("trace_id", t);
    }
    for f in &args.filter {
        query.append_pair("filter", f);
    }
    if let Some(q) = &args.q {
        query.append_pair("q", q);
    }
    if let Some(step) = args.step {
        query.append_pair("step", &step.to_string());
    }
    let path = format!(
        "{}?{}",
        routes::path(routes::RUN_EXPORT, &[&args.run_id]),
        query.finish()
    );
    let mut response = args
        .server
        .client()
        .get_response(&path)
        .await
        .map_err(|e| client_failure(e, "cannot export"))?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    // Lines: a span's or, after its trace's spans, an annotation's.
    let mut progress = Progress::new("exported", "lines");
    let mut lines = 0u64;
    loop {
        let chunk = response
            .chunk()
            .await
            .context("the export was cut short; what was written is incomplete")?;
        let Some(chunk) = chunk else { break };
        lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        out.write_all(&chunk).context("cannot write the export")?;
        progress.show(lines, false);
    }
    out.flush().context("cannot write the export")?;
    progress.show(lines, true);
    Ok(())
}

/// What an import did, and every problem met on the way.
#[derive(Debug, Default)]
pub struct ImportSummary {
    pub spans: u64,
    pub runs: usize,
    pub skipped_lines: u64,
    pub rejected_events: u64,
    pub annotations: u64,
    pub problems: Vec<String>,
}

/// An annotation line waiting for every span to be sent: (line, run, its line).
struct Note {
    line: u64,
    run_id: String,
    note: ExportedAnnotation,
}

pub async fn import(args: ImportArgs) -> Outcome {
    let reader: Box<dyn BufRead> = if args.file.as_os_str() == "-" {
        Box::new(BufReader::new(std::io::stdin().lock()))
    } else {
        Box::new(BufReader::new(
            std::fs::File::open(&args.file)
                .with_context(|| format!("cannot open {}", args.file.display()))?,
        ))
    };
    let client = args.server.client();
    let summary = import_lines(&client, reader, args.run_id.as_deref()).await?;
    for problem in summary.problems.iter().take(PROBLEMS_SHOWN) {
        eprintln!("  {problem}");
    }
    if summary.problems.len() > PROBLEMS_SHOWN {
        eprintln!("  … and {} more", summary.problems.len() - PROBLEMS_SHOWN);
    }
    eprintln!(
        "imported {} spans and {} annotations into {} runs; {} lines skipped, {} events rejected",
        summary.spans,
        summary.annotations,
        summary.runs,
        summary.skipped_lines,
        summary.rejected_events
    );
    if summary.problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::msg(
            "some lines were not imported (listed above); the others were",
        ))
    }
}

/// Events waiting to be sent to one run, with the line each came from.
struct Pending {
    run_id: String,
    events: Vec<Value>,
    lines: Vec<u64>,
    bytes: usize,
}

pub async fn import_lines(
    client: &Client,
    reader: impl BufRead,
    run_override: Option<&str>,
) -> Outcome<ImportSummary> {
    let mut summary = ImportSummary::default();
    let mut created: HashSet<String> = HashSet::new();
    let mut refused: HashSet<String> = HashSet::new();
    let mut pending: Option<Pending> = None;
    let mut notes: Vec<Note> = Vec::new();
    let mut progress = Progress::new("imported", "spans");
    for (n, line) in reader.lines().enumerate() {
        let number = n as u64 + 1;
        let line = line.with_context(|| format!("cannot read line {number}"))?;
        if line.trim().is_empty() {
            continue;
        }
        if is_annotation(&line) {
            match serde_json::from_str::<ExportedAnnotation>(&line) {
                Ok(note) => notes.push(Note {
                    line: number,
                    run_id: run_override.unwrap_or(&note.run_id).to_string(),
                    note,
                }),
                Err(e) => {
                    summary.skipped_lines += 1;
                    summary.problems.push(format!("line {number}: {e}"));
                }
            }
            continue;
        }
        let span: ExportedSpan = match serde_json::from_str(&line) {
            Ok(span) => span,
            Err(e) => {
                summary.skipped_lines += 1;
                summary.problems.push(format!("line {number}: {e}"));
                continue;
            }
        };
        let run_id = run_override.unwrap_or(&span.run_id).to_string();
        if refused.contains(&run_id) {
            summary.skipped_lines += 1;
            continue;
        }
        if !created.contains(&run_id) {
            let run = RunUpsert {
                project: span.project.clone(),
                name: None,
                config: None,
                start_us: None,
            };
            match client.put_run(&run_id, &run).await {
                Ok(_) => {
                    created.insert(run_id.clone());
                }
                Err(ClientError::Api { code, message, .. }) => {
                    summary.skipped_lines += 1;
                    summary.problems.push(format!(
                        "line {number}: run {run_id} was not created ({code}: {message}); \
                         its spans are skipped"
                    ));
                    refused.insert(run_id);
                    continue;
                }
                Err(e) => return Err(client_failure(e, "cannot create a run")),
            }
        }
        if pending.as_ref().is_some_and(|p| p.run_id != run_id) {
            if let Some(batch) = pending.take() {
                send(client, batch, &mut summary).await?;
            }
        }
        let batch = pending.get_or_insert_with(|| Pending {
            run_id,
            events: Vec::new(),
            lines: Vec::new(),
            bytes: 0,
        });
        // The events hold about what the line holds.
        batch.bytes += line.len();
        for event in span.events() {
            batch.events.push(event);
            batch.lines.push(number);
        }
        summary.spans += 1;
        if batch.events.len() >= BATCH_EVENTS || batch.bytes >= BATCH_BYTES {
            if let Some(batch) = pending.take() {
                send(client, batch, &mut summary).await?;
            }
        }
        progress.show(summary.spans, false);
    }
    if let Some(batch) = pending.take() {
        send(client, batch, &mut summary).await?;
    }
    progress.show(summary.spans, true);
    // Every span is in: each annotation now finds its target.
    for n in notes {
        if refused.contains(&n.run_id) || !created.contains(&n.run_id) {
            summary.skipped_lines += 1;
            summary.problems.push(format!(
                "line {}: annotation {} of run {}, whose spans were not imported",
                n.line, n.note.annotation.name, n.run_id
            ));
            continue;
        }
        let path = routes::path(
            routes::TRACE_ANNOTATIONS,
            &[&n.run_id, &n.note.annotation.trace_id],
        );
        match client.put_json::<Value>(&path, &n.note.put_body()).await {
            Ok(_) => summary.annotations += 1,
            Err(ClientError::Api { code, message, .. }) => {
                summary.skipped_lines += 1;
                summary
                    .problems
                    .push(format!("line {}: {code}: {message}", n.line));
            }
            Err(e) => return Err(client_failure(e, "cannot write an annotation")),
        }
    }
    summary.runs = created.len();
    Ok(summary)
}

async fn send(client: &Client, batch: Pending, summary: &mut ImportSummary) -> Outcome {
    let answer = client
        .send_events(&batch.run_id, &batch.events)
        .await
        .map_err(|e| client_failure(e, "cannot send spans"))?;
    for rejection in answer.rejected {
        summary.rejected_events += 1;
        let line = batch.lines.get(rejection.index).copied().unwrap_or(0);
        summary.problems.push(format!(
            "line {line}: {}: {}",
            rejection.code, rejection.message
        ));
    }
    Ok(())
}

/// Whether a line is an annotation's, by its `format` (read without the rest).
fn is_annotation(line: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Format {
        format: Option<String>,
    }
    // The text first: a span's line (which may be megabytes) is not read twice.
    line.contains(ANNOTATION_FORMAT)
        && serde_json::from_str::<Format>(line)
            .is_ok_and(|f| f.format.as_deref() == Some(ANNOTATION_FORMAT))
}

fn client_failure(e: ClientError, what: &str) -> Failure {
    Failure::msg(format!("{what}: {e}"))
}

/// A count on standard error at most once a second, and once at the end.
struct Progress {
    verb: &'static str,
    started: Instant,
    last: Instant,
    what: &'static str,
}

impl Progress {
    fn new(verb: &'static str, what: &'static str) -> Self {
        let now = Instant::now();
        Progress {
            verb,
            what,
            started: now,
            last: now,
        }
    }

    fn show(&mut self, count: u64, done: bool) {
        if !done && self.last.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64();
        eprintln!(
            "{} {count} {} in {secs:.1} s{}",
            self.verb,
            self.what,
            if done { "" } else { " …" }
        );
    }
}
