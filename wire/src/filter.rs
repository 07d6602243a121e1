//! Trace filters, `FIELD OP VALUE` or `FIELD exists`: parsed here once, for the
//! server that applies them and the dashboard that builds them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Invalid;

/// Most filters one trace list takes.
pub const MAX_FILTERS: usize = 8;
/// What a root-attribute field starts with.
pub const ATTR_PREFIX: &str = "attr.";

/// A trace total a filter can test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Total {
    Errors,
    Spans,
    Tokens,
    Iterations,
    Duration,
    Step,
    Rank,
}

impl Total {
    pub const ALL: [Total; 7] = [
        Total::Errors,
        Total::Spans,
        Total::Tokens,
        Total::Iterations,
        Total::Duration,
        Total::Step,
        Total::Rank,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Total::Errors => "error_count",
            Total::Spans => "span_count",
            Total::Tokens => "token_count",
            Total::Iterations => "iteration_count",
            Total::Duration => "duration_us",
            Total::Step => "step",
            Total::Rank => "rank",
        }
    }

    pub fn parse(name: &str) -> Option<Total> {
        Total::ALL.into_iter().find(|t| t.name() == name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    Total(Total),
    /// A root span attribute, by name.
    Attr(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Number(f64),
    Bool(bool),
    Text(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Test {
    Exists,
    Compare(Op, Value),
}

/// One filter of a trace list. Numbers compare as numbers and strings as strings;
/// a number against a string matches nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFilter {
    pub field: Field,
    pub test: Test,
}

impl TraceFilter {
    /// Parses `FIELD OP VALUE` or `FIELD exists`; the error (`bad_filter`) quotes
    /// the expression and says what is wrong with it.
    pub fn parse(expr: &str) -> Result<TraceFilter, Invalid> {
        let bad = |what: &str| Invalid::new("bad_filter", format!("filter {expr:?}: {what}"));
        let text = expr.trim();
        let end = text
            .find(|c: char| c.is_whitespace() || "=!<>\"".contains(c))
            .unwrap_or(text.len());
        let (name, rest) = text.split_at(end);
        let field = match name.strip_prefix(ATTR_PREFIX) {
            Some("") => return Err(bad("attr. needs an attribute name")),
            Some(attr) => Field::Attr(attr.to_string()),
            None if name.is_empty() => return Err(bad("it starts with no field")),
            None => Field::Total(Total::parse(name).ok_or_else(|| {
                bad(&format!(
                    "{name:?} is not a field; use attr.NAME or one of {}",
                    Total::ALL.map(Total::name).join(", ")
                ))
            })?),
        };
        let rest = rest.trim_start();
        if rest == "exists" {
            return Ok(TraceFilter {
                field,
                test: Test::Exists,
            });
        }
        let (op, value) = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("!=", Op::Ne),
            ("=", Op::Eq),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find_map(|(symbol, op)| rest.strip_prefix(symbol).map(|v| (op, v.trim())))
        .ok_or_else(|| bad("expected an operator (= != < <= > >=) or exists after the field"))?;
        let value = parse_value(value).map_err(&bad)?;
        if matches!(value, Value::Bool(_)) && !matches!(op, Op::Eq | Op::Ne) {
            return Err(bad("true and false compare only with = or !="));
        }
        Ok(TraceFilter {
            field,
            test: Test::Compare(op, value),
        })
    }
}

fn parse_value(text: &str) -> Result<Value, &'static str> {
    if let Some(quoted) = text.strip_prefix('"') {
        let inner = quoted
            .strip_suffix('"')
            .ok_or("a quoted value needs its closing quote")?;
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next().ok_or("a value cannot end with a backslash")?),
                '"' => return Err("a quote inside a value must be written \\\""),
                c => out.push(c),
            }
        }
        return Ok(Value::Text(out));
    }
    match text {
        "" => Err("a value is missing after the operator"),
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        _ => match text.parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(Value::Number(n)),
            Ok(_) => Err("a number must be finite"),
            Err(_) if text.contains(char::is_whitespace) => {
                Err("a value with spaces must be double-quoted")
            }
            Err(_) => Ok(Value::Text(text.to_string())),
        },
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Total(t) => f.write_str(t.name()),
            Field::Attr(name) => write!(f, "{ATTR_PREFIX}{name}"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            // Quoted unless it would read back as itself bare.
            Value::Text(t) if parse_value(t).ok().as_ref() == Some(self) => f.write_str(t),
            Value::Text(t) => write!(f, "\"{}\"", t.replace('\\', "\\\\").replace('"', "\\\"")),
        }
    }
}

/// The canonical form, which [`TraceFilter::parse`] reads back as the same filter.
impl fmt::Display for TraceFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.test {
            Test::Exists => write!(f, "{} exists", self.field),
            Test::Compare(op, value) => write!(f, "{} {} {value}", self.field, op.symbol()),
        }
    }
}

/// A root-attribute key of a run's traces: what the filter builder offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttributeKey {
    pub key: String,
    /// `number`, `string` or `boolean`; a key with values of several types is
    /// listed once for each.
    pub kind: String,
    /// How many traces carry it with this type.
    pub traces: i64,
    /// The range of a number key.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// The most common values of a string or boolean key, most common first.
    pub values: Vec<ValueCount>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueCount {
    pub value: String,
    pub traces: i64,
}

/// The answer of `GET /api/runs/{run_id}/traces/attributes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AttributeKeys {
    pub attributes: Vec<AttributeKey>,
}

/// Most common values listed per string key.
pub const TOP_VALUES: usize = 20;
/// The longest value listed as a common value (characters): a longer one (a cut
/// prompt, a JSON blob) is no choice to offer in a picker.
pub const MAX_LISTED_VALUE_CHARS: usize = 120;
/// Most keys listed per run.
pub const MAX_ATTRIBUTE_KEYS: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(expr: &str) -> TraceFilter {
        TraceFilter::parse(expr).unwrap_or_else(|e| panic!("{expr}: {}", e.message))
    }

    #[test]
    fn reads_totals_attributes_operators_and_values() {
        let f = parse("error_count > 0");
        assert_eq!(f.field, Field::Total(Total::Errors));
        assert_eq!(f.test, Test::Compare(Op::Gt, Value::Number(0.0)));
        let f = parse("attr.reward<0.5");
        assert_eq!(f.field, Field::Attr("reward".into()));
        assert_eq!(f.test, Test::Compare(Op::Lt, Value::Number(0.5)));
        assert_eq!(parse("attr.gen_ai.system exists").test, Test::Exists);
        assert_eq!(
            parse("attr.task = \"math word\"").test,
            Test::Compare(Op::Eq, Value::Text("math word".into()))
        );
        assert_eq!(
            parse("attr.env != CartPole-v1").test,
            Test::Compare(Op::Ne, Value::Text("CartPole-v1".into()))
        );
        assert_eq!(
            parse("attr.solved = true").test,
            Test::Compare(Op::Eq, Value::Bool(true))
        );
        assert_eq!(
            parse("step >= 300").test,
            Test::Compare(Op::Ge, Value::Number(300.0))
        );
    }

    #[test]
    fn every_mistake_is_named() {
        for (expr, says) in [
            ("", "no field"),
            ("reward > 1", "not a field"),
            ("attr. > 1", "attribute name"),
            ("error_count", "operator"),
            ("error_count ~ 1", "operator"),
            ("error_count >", "missing"),
            ("attr.a = \"open", "closing quote"),
            ("attr.a = two words", "double-quoted"),
            ("attr.a < true", "only with = or !="),
            ("attr.a = inf", "finite"),
        ] {
            let e = TraceFilter::parse(expr).expect_err(expr);
            assert_eq!(e.code, "bad_filter");
            assert!(e.message.contains(says), "{expr}: {}", e.message);
            assert!(e.message.contains(&format!("{expr:?}")), "{}", e.message);
        }
    }

    #[test]
    fn the_canonical_form_reads_back_the_same() {
        for expr in [
            "error_count > 0",
            "attr.reward <= -0.25",
            "attr.task = \"math word\"",
            "attr.task = \"12\"",
            "attr.q = \"say \\\"hi\\\"\"",
            "attr.env = CartPole-v1",
            "attr.ok != false",
            "rank exists",
        ] {
            let f = parse(expr);
            assert_eq!(parse(&f.to_string()), f, "{expr} -> {f}");
        }
        assert_eq!(
            parse("attr.task = \"12\"").to_string(),
            "attr.task = \"12\""
        );
    }
}
