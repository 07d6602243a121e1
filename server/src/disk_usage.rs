//! `treeline du`: how much space the database takes, by project and by run,
//! straight on the database a server uses. Sizes are estimates: a run's share of
//! the space is its share of what ingest counted (docs/api.md §8.2).

use treeline_wire::human_bytes;

use crate::failure::{Context, Failure, Outcome};

#[derive(clap::Args)]
pub struct DuArgs {
    /// Only this project's runs (every project is still summed).
    #[arg(long)]
    project: Option<String>,
    /// How many of the largest runs to list.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    runs: u32,
    /// Also each table's and index's size (on SQLite this reads the whole file).
    #[arg(long)]
    tables: bool,
    #[command(flatten)]
    database: crate::database_args::DatabaseArgs,
}

pub async fn run_command(args: DuArgs) -> Outcome {
    let store = args.database.open(false, "").await?;
    let usage = store
        .reads()
        .disk_usage(args.project.as_deref(), args.runs as usize)
        .await
        .context("cannot read the database")?;
    if let Some(p) = &args.project {
        if !usage.projects.iter().any(|(name, _, _)| name == p) {
            return Err(Failure::msg(format!("there is no project {p:?}")));
        }
    }
    let mut out = format!(
        "In use: {}; free for reuse: {}",
        human_bytes(usage.used),
        human_bytes(usage.free)
    );
    if usage.deleting > 0 {
        out += &format!(
            "; under deleted runs still being removed: {}",
            human_bytes(usage.deleting)
        );
    }
    out += "\n\n";
    let width = |names: &mut dyn Iterator<Item = usize>| names.max().unwrap_or(0).clamp(7, 60);
    let w = width(&mut usage.projects.iter().map(|(n, _, _)| n.chars().count()));
    out += &format!("{:<w$}  {:>6}  {:>9}\n", "Project", "Runs", "Size");
    for (name, runs, bytes) in &usage.projects {
        out += &format!(
            "{:<w$}  {runs:>6}  {:>9}\n",
            clip(name, w),
            human_bytes(*bytes)
        );
    }
    let heading = match &args.project {
        Some(p) => format!("\nLargest runs of {p}\n"),
        None => "\nLargest runs\n".to_string(),
    };
    out += &heading;
    let w = width(&mut usage.runs.iter().map(|(_, _, n, _)| n.chars().count()));
    let iw = usage
        .runs
        .iter()
        .map(|(id, ..)| id.len())
        .max()
        .unwrap_or(0)
        .max(2);
    out += &format!("{:<w$}  {:<iw$}  {:>9}\n", "Run", "Id", "Size");
    for (id, _, name, bytes) in &usage.runs {
        out += &format!(
            "{:<w$}  {id:<iw$}  {:>9}\n",
            clip(name, w),
            human_bytes(*bytes)
        );
    }
    if args.tables {
        let tables = store
            .reads()
            .table_sizes()
            .await
            .context("cannot read the tables' sizes")?;
        let w = width(&mut tables.iter().map(|(n, _)| n.chars().count()));
        out += &format!("\n{:<w$}  {:>9}\n", "Table or index", "Size");
        for (name, bytes) in &tables {
            out += &format!("{:<w$}  {:>9}\n", clip(name, w), human_bytes(*bytes));
        }
    }
    out += "\nSizes are estimates: each run's share of the space in use, in proportion to \
            the bytes its spans, bodies and metric points brought.";
    println!("{out}");
    Ok(())
}

/// `text` cut to `width` characters, with an ellipsis where it was cut.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
