//! `treeline keys`: create, list and revoke the API keys kept in the database. A
//! running server sees a change with its next request.

use std::io::Write;

use crate::failure::{Context, Failure, Outcome};
use crate::http::auth::Scope;
use crate::http::{now_us, secret};
use crate::store::KeyRecord;

#[derive(clap::Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
    #[command(flatten)]
    database: crate::database_args::DatabaseArgs,
    /// Make a new SQLite database in --data-dir when there is none (the first key,
    /// before the server has started there). Without it, a missing database is an
    /// error: a key written to the wrong folder would do nothing.
    #[arg(long, global = true)]
    init: bool,
}

#[derive(clap::Subcommand)]
enum KeysCommand {
    /// Create a key and print it, once, as the last line of standard output.
    Create {
        /// read (look only), write (send runs and traces, and look) or admin
        /// (everything, over every project).
        #[arg(long, value_parser = ["read", "write", "admin"])]
        scope: String,
        /// Limit the key to one project: it sees nothing of the others.
        #[arg(long)]
        project: Option<String>,
        /// A name to know the key by in `keys list`.
        #[arg(long)]
        name: Option<String>,
    },
    /// List the keys: id, name, scope, project, created, last used, and revoked.
    List,
    /// End a key at once, and every browser session opened with it. The key stays
    /// listed, as revoked.
    Revoke {
        /// The key's id, as `keys list` shows it.
        id: String,
        /// Revoke it even though it is the last key that works: a loopback server
        /// started without --api-key then asks nobody for a key.
        #[arg(long)]
        last: bool,
    },
}

pub async fn run_command(args: KeysArgs) -> Outcome {
    let store = args
        .database
        .open(args.init, ", or pass --init to make a new one there")
        .await?;
    let access = store.access();
    let mut out = std::io::stdout().lock();
    match args.command {
        KeysCommand::Create {
            scope,
            project,
            name,
        } => {
            let scope = Scope::parse(&scope)
                .ok_or_else(|| Failure::msg("--scope must be read, write or admin"))?;
            if scope == Scope::Admin && project.is_some() {
                return Err(Failure::msg(
                    "an admin key covers every project; use --scope write or read with --project",
                ));
            }
            if let Some(p) = &project {
                treeline_wire::check_project(p)
                    .map_err(|e| Failure::msg(format!("--project: {}", e.message)))?;
            }
            let key = secret::new_key().context("the system gave no randomness")?;
            let record = KeyRecord {
                id: secret::new_key_id().context("the system gave no randomness")?,
                name: name.unwrap_or_else(|| format!("{} key", scope.as_str())),
                scope: scope.as_str().to_string(),
                project,
                created_us: now_us(),
                last_used_us: None,
                revoked_us: None,
            };
            access
                .create_key(&record, &secret::digest(&key))
                .await
                .context("cannot store the key")?;
            let reach = record
                .project
                .as_deref()
                .map_or("every project".to_string(), |p| {
                    format!("project {p:?} only")
                });
            writeln!(
                out,
                "Created {} ({}, {} scope, {reach}). It is shown this once; the server keeps only its digest:",
                record.id, record.name, record.scope
            )
            .context("cannot write to standard output")?;
            writeln!(out, "{key}").context("cannot write to standard output")?;
        }
        KeysCommand::List => {
            let keys = access.list_keys().await.context("cannot read the keys")?;
            if keys.is_empty() {
                writeln!(
                    out,
                    "No stored keys. Create one with `treeline keys create --scope write`."
                )
                .context("cannot write to standard output")?;
            } else {
                write_table(&mut out, &keys).context("cannot write to standard output")?;
            }
        }
        KeysCommand::Revoke { id, last } => {
            let keys = access.list_keys().await.context("cannot read the keys")?;
            let Some(key) = keys.iter().find(|k| k.id == id) else {
                return Err(Failure::msg(format!(
                    "no key has the id {id:?}; `treeline keys list` shows them"
                )));
            };
            if let Some(when) = key.revoked_us {
                return Err(Failure::msg(format!(
                    "{id} was revoked already, at {}",
                    self::when(Some(when))
                )));
            }
            let others = keys.iter().filter(|k| k.revoked_us.is_none()).count() - 1;
            if others == 0 && !last {
                return Err(Failure::msg(format!(
                    "{id} is the last key that works. Once it is revoked, a server on \
                     loopback started without --api-key asks nobody for a key: anyone who \
                     reaches it reads and writes everything. Create another key first, or \
                     pass --last to revoke it anyway"
                )));
            }
            access
                .revoke_key(&id, now_us())
                .await
                .context("cannot revoke the key")?;
            writeln!(
                out,
                "Revoked {id}: it and its browser sessions no longer work. `keys list` \
                 still shows it, as revoked."
            )
            .context("cannot write to standard output")?;
            if others == 0 {
                writeln!(
                    out,
                    "No key works now: a loopback server started without --api-key is open \
                     to anyone who reaches it, from its next request."
                )
                .context("cannot write to standard output")?;
            }
        }
    }
    Ok(())
}

fn write_table(out: &mut impl Write, keys: &[KeyRecord]) -> std::io::Result<()> {
    let rows: Vec<[String; 7]> = keys
        .iter()
        .map(|k| {
            [
                k.id.clone(),
                k.name.clone(),
                k.scope.clone(),
                k.project.clone().unwrap_or_else(|| "(all)".into()),
                when(Some(k.created_us)),
                when(k.last_used_us),
                k.revoked_us.map_or_else(|| "-".into(), |t| when(Some(t))),
            ]
        })
        .collect();
    let header = [
        "ID",
        "NAME",
        "SCOPE",
        "PROJECT",
        "CREATED",
        "LAST USED",
        "REVOKED",
    ]
    .map(String::from);
    let mut widths = [0usize; 7];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

/// A time in microseconds as `YYYY-MM-DD HH:MM UTC`, or "never".
fn when(us: Option<i64>) -> String {
    let Some(us) = us else {
        return "never".into();
    };
    let secs = us.div_euclid(1_000_000);
    let (y, m, d) = treeline_wire::civil_date(secs.div_euclid(86_400));
    let minute = secs.rem_euclid(86_400) / 60;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        minute / 60,
        minute % 60
    )
}
