//! `treeline runs`: an administrator's commands on runs, straight on the database
//! a server uses (which may be running: it sees the change at once).

use std::io::Write;

use crate::failure::{Context, Failure, Outcome};
use crate::http::now_us;

#[derive(clap::Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    command: RunsCommand,
    #[command(flatten)]
    database: crate::database_args::DatabaseArgs,
}

#[derive(clap::Subcommand)]
enum RunsCommand {
    /// Delete a run: its traces, spans, bodies, metrics and annotations. It leaves
    /// the dashboard and the API at once; its data is then removed, with progress.
    Delete {
        /// The run's id (Run Detail shows it).
        run_id: String,
    },
}

pub async fn run_command(args: RunsArgs) -> Outcome {
    let store = args.database.open(false, "").await?;
    match args.command {
        RunsCommand::Delete { run_id } => {
            treeline_wire::check_id(&run_id, "run_id").map_err(|e| Failure::msg(e.message))?;
            let Some(project) = store
                .delete_run(&run_id, now_us())
                .await
                .context("cannot delete the run")?
            else {
                return Err(Failure::msg(format!("there is no run {run_id:?}")));
            };
            println!("Deleted run {run_id} (project {project:?}); removing its data…");
            let mut removed: u64 = 0;
            let mut err = std::io::stderr().lock();
            // Every deleted run waiting, this one among them (a server's purge may
            // take some batches meanwhile).
            while let Some(step) = store
                .purge_step(crate::purge::BATCH_ROWS)
                .await
                .context("cannot remove the run's data (run the command again to resume)")?
            {
                if step.done && step.run_id == run_id {
                    break;
                }
                removed = removed.saturating_add(step.rows);
                // Progress, overwritten in place.
                let _ = write!(err, "\r  {removed} rows removed ({})   ", step.table);
            }
            let _ = writeln!(err);
            println!("Removed run {run_id}'s data ({removed} rows); its id may be used again.");
            crate::purge::reclaim_saying(store.as_ref()).await?;
        }
    }
    Ok(())
}
