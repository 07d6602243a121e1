//! The flags by which a command beside a server (`keys`, `runs`) finds the database
//! that server uses.

use std::path::PathBuf;
use std::sync::Arc;

use crate::failure::{Context, Failure, Outcome};
use crate::store::Store;

#[derive(clap::Args)]
pub struct DatabaseArgs {
    /// Directory of the embedded SQLite database, as given to `serve`.
    #[arg(
        long,
        env = "TREELINE_DATA_DIR",
        default_value = "./treeline-data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// The database, as given to `serve`: sqlite:PATH or postgres://…
    #[arg(long, env = "TREELINE_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
}

impl DatabaseArgs {
    /// The database. A missing SQLite file is an error unless `make_new` (a command
    /// run in the wrong folder would do nothing); `hint` ends that error's message.
    pub async fn open(&self, make_new: bool, hint: &str) -> Outcome<Arc<dyn Store>> {
        let file = self.data_dir.join(crate::store::SQLITE_FILE);
        if self.database_url.is_none() && !make_new && !file.exists() {
            return Err(Failure::msg(format!(
                "there is no Treeline database at {}: give the server's --data-dir (or \
                 TREELINE_DATA_DIR, or --database-url){hint}",
                file.display()
            )));
        }
        let (_, store) = crate::store::open_in(&self.data_dir, self.database_url.as_deref(), None)
            .await
            .context("cannot open the database")?;
        Ok(store)
    }
}
