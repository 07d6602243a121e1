use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::Invalid;

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident, $what:literal, $code:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses `text`, or says which values are valid, naming `field`.
            pub fn parse_field(text: &str, field: &str) -> Result<Self, Invalid> {
                text.parse().map_err(|_| Invalid::new($code, format!(
                    "{field} {text:?} is not a valid {}; valid values are: {}",
                    $what,
                    Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", "),
                )))
            }
        }

        impl FromStr for $name {
            type Err = ();
            fn from_str(text: &str) -> Result<Self, ()> {
                match text { $($text => Ok($name::$variant),)+ _ => Err(()) }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                Self::parse_field(&text, $what).map_err(serde::de::Error::custom)
            }
        }
    };
}

vocabulary!(
    /// What a span does. The set is fixed so the dashboard can render each kind well.
    SpanKind, "span kind", "invalid_kind" {
        Rollout => "rollout",
        EnvStep => "env_step",
        Model => "model",
        Tool => "tool",
        Retrieval => "retrieval",
        Reward => "reward",
        Evaluator => "evaluator",
        Dataset => "dataset",
        Preprocessing => "preprocessing",
        Postprocessing => "postprocessing",
        Checkpoint => "checkpoint",
        Artifact => "artifact",
        System => "system",
        Custom => "custom",
        Thought => "thought",
        Agent => "agent",
        Iteration => "iteration",
        Function => "function",
        Session => "session",
    }
);

vocabulary!(
    /// A span's state. `running` until closed; `interrupted` when its run finished first.
    SpanStatus, "span status", "invalid_status" {
        Running => "running",
        Ok => "ok",
        Error => "error",
        Cancelled => "cancelled",
        Truncated => "truncated",
        Interrupted => "interrupted",
    }
);

vocabulary!(
    RunStatus, "run status", "invalid_status" {
        Running => "running",
        Finished => "finished",
        Failed => "failed",
    }
);

impl SpanKind {
    /// One bit per kind, so a trace's set of kinds fits one integer column.
    pub fn bit(self) -> i64 {
        1 << (self as i64)
    }

    pub fn from_bits(bits: i64) -> Vec<SpanKind> {
        Self::ALL
            .iter()
            .copied()
            .filter(|k| bits & k.bit() != 0)
            .collect()
    }

    pub fn bits_of(kinds: &[SpanKind]) -> i64 {
        kinds.iter().fold(0, |acc, k| acc | k.bit())
    }
}

impl SpanStatus {
    /// The word the dashboard shows.
    pub fn label(self) -> &'static str {
        match self {
            SpanStatus::Ok => "completed",
            SpanStatus::Error => "failed",
            other => other.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_kind_lists_every_valid_one() {
        let err = SpanKind::parse_field("llm", "kind").unwrap_err();
        assert_eq!(err.code, "invalid_kind");
        assert!(err.message.starts_with("kind \"llm\""));
        for kind in SpanKind::ALL {
            assert!(err.message.contains(kind.as_str()));
        }
        assert_eq!(SpanKind::ALL.len(), 19);
    }

    #[test]
    fn kind_bits_round_trip() {
        let kinds = [SpanKind::Rollout, SpanKind::Session, SpanKind::Tool];
        let mut back = SpanKind::from_bits(SpanKind::bits_of(&kinds));
        back.sort();
        let mut want = kinds.to_vec();
        want.sort();
        assert_eq!(back, want);
    }
}
