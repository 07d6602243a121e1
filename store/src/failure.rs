//! The error of a command (`serve`, `demo`, `bench`): what was being done, and the
//! error underneath, kept as a source so the whole chain is printed; and [`chain`],
//! how any error is written to the log.

use std::error::Error;

#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct Failure {
    context: String,
    #[source]
    source: Option<Box<dyn Error + Send + Sync>>,
}

impl Failure {
    /// A failure with no error underneath it.
    pub fn msg(context: impl Into<String>) -> Self {
        Failure {
            context: context.into(),
            source: None,
        }
    }

    /// The failure and its sources, outermost first, as one line.
    pub fn report(&self) -> String {
        chain(self)
    }
}

/// An error and its sources, outermost first, as one line for the log.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Says what was being done when an error happened.
pub trait Context<T> {
    fn context(self, what: impl Into<String>) -> Result<T, Failure>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Failure>;
}

impl<T, E: Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T, Failure> {
        self.map_err(|e| Failure {
            context: what.into(),
            source: Some(Box::new(e)),
        })
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Failure> {
        self.map_err(|e| Failure {
            context: what(),
            source: Some(Box::new(e)),
        })
    }
}

pub type Outcome<T = ()> = Result<T, Failure>;
