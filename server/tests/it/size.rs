//! Size: a 1 GiB body, sent with its length or chunked, and gzip and zstd bombs that
//! inflate to 1 GiB each answer 413 from the real `treeline serve` process, whose peak
//! memory stays within the bound the README states.

use std::io::Write;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{free_addr, serve, wait_ready};

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;
/// The README's bound on the server's peak resident memory through these requests:
/// one body is held to 32 MiB on the wire and 64 MiB inflated, plus the server.
const PEAK_RSS_BOUND_MIB: u64 = 300;

/// How a test body goes on the wire.
enum Framing {
    Length,
    Chunked,
}

/// Sends `head_fields` and `body` (in 1 MiB pieces, as fast as the server reads) as a
/// POST to `path`, and answers the status code of the reply (0 for none). The body is streamed by
/// a task of its own, so a server that answers early is heard at once.
async fn post(addr: &str, path: &str, head_fields: &str, body: Body, framing: Framing) -> u16 {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let length = body.len();
    let framing_field = match framing {
        Framing::Length => format!("Content-Length: {length}"),
        Framing::Chunked => "Transfer-Encoding: chunked".to_string(),
    };
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{head_fields}{framing_field}\r\n\r\n"
    );
    let sender = tokio::spawn(async move {
        writer.write_all(head.as_bytes()).await?;
        for piece in body.pieces() {
            if matches!(framing, Framing::Chunked) {
                writer
                    .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                    .await?;
            }
            writer.write_all(piece).await?;
            if matches!(framing, Framing::Chunked) {
                writer.write_all(b"\r\n").await?;
            }
        }
        if matches!(framing, Framing::Chunked) {
            writer.write_all(b"0\r\n\r\n").await?;
        }
        // Dropping the writer would half-close the connection, which the server takes
        // as the client leaving; it is held until the reply is in.
        std::future::pending::<()>().await;
        std::io::Result::Ok(())
    });
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = reader.read(&mut buf).await.expect("a reply");
        if n == 0 {
            return 0; // closed without a reply
        }
        reply.extend_from_slice(&buf[..n]);
    }
    sender.abort();
    let status_line = String::from_utf8_lossy(&reply);
    status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {status_line}"))
}

/// A body: `repeat` times the same piece (1 GiB of filler in 1 MiB pieces), or bytes
/// held whole (a compression bomb).
enum Body {
    Repeated(Vec<u8>, usize),
    Whole(Vec<u8>),
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Body::Repeated(piece, n) => piece.len() * n,
            Body::Whole(bytes) => bytes.len(),
        }
    }
    fn pieces(&self) -> Box<dyn Iterator<Item = &[u8]> + Send + '_> {
        match self {
            Body::Repeated(piece, n) => Box::new(std::iter::repeat_n(piece.as_slice(), *n)),
            Body::Whole(bytes) => Box::new(bytes.chunks(MIB)),
        }
    }
}

fn gigabyte() -> Body {
    Body::Repeated(vec![b' '; MIB], GIB / MIB)
}

/// 1 GiB of spaces (valid JSON whitespace), compressed.
fn bomb<W: Write>(mut encoder: W) -> W {
    let piece = vec![b' '; MIB];
    for _ in 0..GIB / MIB {
        encoder.write_all(&piece).expect("compress");
    }
    encoder
}

/// The process's peak resident set (VmHWM), in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmHWM in proc status");
    kib / 1024
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gigabyte_body_and_compression_bombs_answer_413_within_bounded_memory() {
    let gzip = bomb(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let gzip = Body::Whole(gzip.finish().expect("gzip bomb"));
    let zstd = bomb(zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd"));
    let zstd = Body::Whole(zstd.finish().expect("zstd bomb"));
    assert!(
        gzip.len() < 8 * MIB && zstd.len() < 8 * MIB,
        "bombs are small on the wire"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let addr = free_addr();
    let server = serve(dir.path(), &addr);
    wait_ready(&format!("http://{addr}")).await;
    let at_rest = peak_rss_mib(server.0.id());

    let events = "/api/runs/size-run/traces/events";
    let cases = [
        (
            "1 GiB with its length",
            events,
            "",
            gigabyte(),
            Framing::Length,
        ),
        ("1 GiB chunked", events, "", gigabyte(), Framing::Chunked),
        (
            "1 GiB chunked to OTLP",
            "/v1/traces",
            "",
            gigabyte(),
            Framing::Chunked,
        ),
        (
            "gzip bomb",
            events,
            "Content-Encoding: gzip\r\n",
            gzip,
            Framing::Length,
        ),
        (
            "zstd bomb",
            events,
            "Content-Encoding: zstd\r\n",
            zstd,
            Framing::Length,
        ),
    ];
    for (name, path, fields, body, framing) in cases {
        let status = post(&addr, path, fields, body, framing).await;
        let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        assert_eq!(status, 413, "{name}; the server's log:\n{log}");
        println!(
            "{name}: 413, server peak RSS so far {} MiB",
            peak_rss_mib(server.0.id())
        );
    }
    let peak = peak_rss_mib(server.0.id());
    println!("server peak RSS: {at_rest} MiB at rest, {peak} MiB after the five bodies");
    assert!(
        peak < PEAK_RSS_BOUND_MIB,
        "peak RSS {peak} MiB is over the stated {PEAK_RSS_BOUND_MIB} MiB"
    );
    // Still serving.
    wait_ready(&format!("http://{addr}")).await;
}

/// The bodies' shared budget: chunked bodies still arriving each hold the wire
/// limit; once they hold the whole budget, one more write answers 503 with
/// Retry-After and stores nothing, and when they are gone it is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_past_the_body_budget_answer_503_until_the_bodies_are_gone() {
    use treeline_server::http::{body::MAX_WIRE_BYTES, budget::BODY_BUDGET_MIB};
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = free_addr();
    let base = format!("http://{addr}");
    let _server = serve(dir.path(), &addr);
    wait_ready(&base).await;
    let client = treeline_client::Client::new(&base);
    let run = treeline_wire::RunUpsert {
        project: "budget".into(),
        ..Default::default()
    };
    client.put_run("budget-run", &run).await.expect("run");

    let path = "/api/runs/budget-run/traces/events";
    // One chunked body more than the budget holds: each counts the wire limit from
    // its start, so all but one take their shares and the last is refused, which
    // shows the budget is full before anything else is sent.
    let mut held = Vec::new();
    for _ in 0..=BODY_BUDGET_MIB / (MAX_WIRE_BYTES / MIB) {
        let mut stream = TcpStream::connect(&addr).await.expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: chunked\r\n\r\n5\r\n{{\"eve\r\n"
        );
        stream.write_all(head.as_bytes()).await.expect("send");
        held.push(stream);
    }
    let mut answered = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while answered.is_none() && std::time::Instant::now() < deadline {
        for (i, stream) in held.iter_mut().enumerate() {
            let mut buf = [0u8; 64];
            let read =
                tokio::time::timeout(std::time::Duration::from_millis(20), stream.read(&mut buf));
            if let Ok(Ok(n)) = read.await {
                answered = Some((i, String::from_utf8_lossy(&buf[..n]).into_owned()));
                break;
            }
        }
    }
    let (i, reply) = answered.expect("one held body is refused within 30 s");
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    held.remove(i);

    let http = reqwest::Client::new();
    let send = |trace: String| {
        let batch = serde_json::json!({"events": [{"op": "open", "trace_id": trace,
            "span_id": "s1", "name": "root", "kind": "rollout", "ts": 1}]});
        http.post(format!("{base}{path}")).json(&batch).send()
    };
    let trace = "refused".to_string();
    let refused = send(trace.clone()).await.expect("an answer");
    assert_eq!(refused.status(), 503);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let lookup = http
        .get(format!("{base}/api/runs/budget-run/traces/{trace}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        lookup.status(),
        404,
        "nothing of the refused write is stored"
    );

    drop(held);
    let mut status = 0;
    for attempt in 0..100 {
        status = send(format!("late-{attempt}"))
            .await
            .expect("an answer")
            .status()
            .as_u16();
        if status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "once the bodies are gone, writes are stored");
}

/// A body that is small even inflated but decodes to many items: `prefix`, then
/// `item` `count` times joined by `,`, then `suffix`, gzipped.
fn many_items(prefix: &[u8], item: &[u8], count: usize, suffix: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(prefix).expect("compress");
    let mut piece = Vec::new();
    for _ in 0..1000 {
        piece.extend_from_slice(item);
        piece.push(b',');
    }
    for _ in 0..count / 1000 - 1 {
        encoder.write_all(&piece).expect("compress");
    }
    encoder
        .write_all(&piece[..piece.len() - 1])
        .expect("compress");
    encoder.write_all(suffix).expect("compress");
    encoder.finish().expect("gzip")
}

/// An OTLP protobuf request of `spans` empty spans, gzipped: two bytes a span.
fn empty_spans(spans: usize) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, inner: &[u8]) {
        out.push(tag << 3 | 2);
        let mut len = inner.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(inner);
    }
    let scope = b"\x12\x00".repeat(spans);
    let mut resource = Vec::new();
    field(&mut resource, 2, &scope);
    let mut request = Vec::new();
    field(&mut request, 1, &resource);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&request).expect("compress");
    encoder.finish().expect("gzip")
}

/// Requests a few KB on the wire whose items would take gigabytes decoded are refused
/// while they decode, holding the server's memory to a few MiB more.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_of_millions_of_small_items_answer_413_within_bounded_memory() {
    const GROWTH_BOUND_MIB: u64 = 100;
    let cases = [
        (
            "2,000,000 empty events",
            "/api/runs/size-run/traces/events",
            "application/json",
            many_items(br#"{"events":["#, b"{}", 2_000_000, b"]}"),
        ),
        // Under the count of values: the list's own bound stops its decoding.
        (
            "400,000 empty events",
            "/api/runs/size-run/traces/events",
            "application/json",
            many_items(br#"{"events":["#, b"{}", 400_000, b"]}"),
        ),
        (
            "2,000,000 empty metric points",
            "/api/runs/size-run/metrics",
            "application/json",
            many_items(br#"{"points":["#, b"{}", 2_000_000, b"]}"),
        ),
        (
            "a run whose config holds 3,000,000 numbers",
            "/api/runs/size-run",
            "application/json",
            many_items(br#"{"project":"p","config":["#, b"0", 3_000_000, b"]}"),
        ),
        (
            "4,000,000 empty OTLP spans (protobuf)",
            "/v1/traces",
            "application/x-protobuf",
            empty_spans(4_000_000),
        ),
        (
            "2,000,000 empty OTLP spans (JSON)",
            "/v1/traces",
            "application/json",
            many_items(
                br#"{"resourceSpans":[{"scopeSpans":[{"spans":["#,
                b"{}",
                2_000_000,
                b"]}]}]}",
            ),
        ),
    ];
    for (name, _, _, body) in &cases {
        assert!(body.len() < 64 * 1024, "{name} is {} bytes", body.len());
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = free_addr();
    let server = serve(dir.path(), &addr);
    wait_ready(&format!("http://{addr}")).await;
    let at_rest = peak_rss_mib(server.0.id());
    for (name, path, content_type, body) in cases {
        let method = if path == "/api/runs/size-run" {
            "PUT"
        } else {
            "POST"
        };
        let reply = reqwest::Client::new()
            .request(
                method.parse().expect("method"),
                format!("http://{addr}{path}"),
            )
            .header("content-type", content_type)
            .header("content-encoding", "gzip")
            .body(body)
            .send()
            .await
            .expect("an answer");
        let status = reply.status().as_u16();
        let text = reply.text().await.unwrap_or_default();
        assert_eq!(status, 413, "{name}: {text}");
        if name.starts_with("400,000") || name.contains("protobuf") {
            assert!(text.contains("too_many_items"), "{name}: {text}");
        }
        let peak = peak_rss_mib(server.0.id());
        println!("{name}: 413 ({text}); server peak RSS {peak} MiB, {at_rest} MiB at rest");
        assert!(
            peak.saturating_sub(at_rest) < GROWTH_BOUND_MIB,
            "{name}: peak RSS grew from {at_rest} to {peak} MiB"
        );
    }
    wait_ready(&format!("http://{addr}")).await;
}
