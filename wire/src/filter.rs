//! Trace filters, `FIELD OP VALUE` or `FIELD exists`: parsed here once, for the
//! server that applies them and the dashboard that builds them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Invalid, SpanKind, SpanStatus};

/// Most filters one trace list takes.
pub const MAX_FILTERS: usize = 8;
/// What a root-attribute field starts with.
pub const ATTR_PREFIX: &str = "attr.";
/// What a span field starts with: "a trace holding a span such that …".
pub const SPAN_PREFIX: &str = "span.";
/// What an annotation field starts with: "a trace with an annotation (on it or on
/// one of its spans, by anyone) such that …".
pub const NOTE_PREFIX: &str = "note.";

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
    /// A field of any span of the trace; all the span fields of one list must hold
    /// on the same span.
    Span(SpanField),
    /// An annotation of the trace or of one of its spans, by name, any author.
    Note(String),
}

/// What a `span.` filter tests on each span of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpanField {
    Name,
    Kind,
    Status,
    /// The `type` of the span's error body, when that body is an object.
    ErrorType,
    /// A span attribute, by name.
    Attr(String),
}

impl SpanField {
    /// The span fields by name, `attr.NAME` aside.
    const NAMED: [(&'static str, SpanField); 4] = [
        ("name", SpanField::Name),
        ("kind", SpanField::Kind),
        ("status", SpanField::Status),
        ("error_type", SpanField::ErrorType),
    ];

    fn parse(name: &str) -> Result<SpanField, String> {
        if let Some(attr) = name.strip_prefix(ATTR_PREFIX) {
            return match attr {
                "" => Err("span.attr. needs an attribute name".into()),
                _ => Ok(SpanField::Attr(attr.to_string())),
            };
        }
        SpanField::NAMED
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f)
            .ok_or_else(|| {
                format!(
                    "\"span.{name}\" is not a span field; use span.attr.NAME or one of \
                     span.name, span.kind, span.status, span.error_type"
                )
            })
    }
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
    /// `in (a, b)`: equal to one of the values; with `negated`, `not in`: different
    /// from each (so, as with `!=`, a trace lacking the field matches neither).
    In {
        negated: bool,
        values: Vec<Value>,
    },
}

/// Most values one `in` list takes.
pub const MAX_IN_VALUES: usize = 20;

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
            None if name.starts_with(NOTE_PREFIX) => match &name[NOTE_PREFIX.len()..] {
                "" => return Err(bad("note. needs an annotation name")),
                note => Field::Note(note.to_string()),
            },
            None if name.starts_with(SPAN_PREFIX) => {
                Field::Span(SpanField::parse(&name[SPAN_PREFIX.len()..]).map_err(|e| bad(&e))?)
            }
            None => Field::Total(Total::parse(name).ok_or_else(|| {
                bad(&format!(
                    "{name:?} is not a field; use attr.NAME, span.FIELD, note.NAME or one of {}",
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
        for (word, negated) in [("in", false), ("not in", true)] {
            if let Some(list) = rest.strip_prefix(word).and_then(|r| {
                let r = r.trim_start();
                r.starts_with('(').then_some(r)
            }) {
                let values = parse_list(list).map_err(|e| bad(&e))?;
                return Ok(TraceFilter {
                    field,
                    test: Test::In { negated, values },
                });
            }
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
        .ok_or_else(|| {
            bad("expected an operator (= != < <= > >= in, not in) or exists after the field")
        })?;
        let value = parse_value(value).map_err(&bad)?;
        if matches!(value, Value::Bool(_)) && !matches!(op, Op::Eq | Op::Ne) {
            return Err(bad("true and false compare only with = or !="));
        }
        // A kind or a status outside the vocabulary would match nothing: say so.
        if let (Field::Span(f @ (SpanField::Kind | SpanField::Status)), Value::Text(t)) =
            (&field, &value)
        {
            let checked = match f {
                SpanField::Kind => SpanKind::parse_field(t, "span.kind").map(|_| ()),
                _ => SpanStatus::parse_field(t, "span.status").map(|_| ()),
            };
            checked.map_err(|e| bad(&e.message))?;
        }
        Ok(TraceFilter {
            field,
            test: Test::Compare(op, value),
        })
    }
}

/// `(a, "b c", 3)`: the values of an `in` list, each read as a value after `=` is.
fn parse_list(text: &str) -> Result<Vec<Value>, String> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.trim_end().strip_suffix(')'))
        .ok_or("an in list is written (a, b, c)")?;
    let mut values = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        // A quoted item ends at its closing quote (past escaped ones), a bare one
        // at the next comma.
        let end = if rest.starts_with('"') {
            let mut escaped = false;
            rest.char_indices()
                .skip(1)
                .find(|&(_, c)| {
                    let close = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    close
                })
                .map_or(rest.len(), |(i, _)| i + 1)
        } else {
            rest.find(',').unwrap_or(rest.len())
        };
        let item = rest[..end].trim();
        values.push(parse_value(item).map_err(|e| format!("in the list: {e}"))?);
        rest = rest[end..].trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after.trim_start();
            if rest.is_empty() {
                return Err("the list ends with a comma".into());
            }
        } else if !rest.is_empty() {
            return Err("items of an in list are separated by commas".into());
        }
    }
    match values.len() {
        0 => Err("an in list needs at least one value".into()),
        n if n > MAX_IN_VALUES => Err(format!(
            "an in list takes at most {MAX_IN_VALUES} values; {n} given"
        )),
        _ => Ok(values),
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
            Field::Note(name) => write!(f, "{NOTE_PREFIX}{name}"),
            Field::Span(SpanField::Attr(name)) => write!(f, "{SPAN_PREFIX}{ATTR_PREFIX}{name}"),
            Field::Span(field) => {
                let name = SpanField::NAMED
                    .iter()
                    .find(|(_, f)| f == field)
                    .map_or("", |(n, _)| n);
                write!(f, "{SPAN_PREFIX}{name}")
            }
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Bool(b) => write!(f, "{b}"),
            // Quoted unless it would read back as itself bare.
            Value::Text(t)
                if !t.contains([',', '(', ')']) && parse_value(t).ok().as_ref() == Some(self) =>
            {
                f.write_str(t)
            }
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
            Test::In { negated, values } => {
                let list: Vec<String> = values.iter().map(Value::to_string).collect();
                let word = if *negated { "not in" } else { "in" };
                write!(f, "{} {word} ({})", self.field, list.join(", "))
            }
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
    /// The run's annotation names (for `note.NAME`), in the same shape: `traces`
    /// counts the traces holding one, on the trace or on a span of it.
    #[serde(default)]
    pub notes: Vec<AttributeKey>,
    /// The attribute keys of a sample of the run's spans (its first 2,000 in key
    /// order), for `span.attr.NAME`, in the same shape: `traces` counts the sampled
    /// traces holding a span with the key, ranges and values are the sample's.
    #[serde(default)]
    pub span_attributes: Vec<AttributeKey>,
}

impl AttributeKeys {
    /// The keys of one kind (`number`, `string`, `boolean`), most common first.
    pub fn names<'k>(&'k self, kind: &'k str) -> impl Iterator<Item = &'k str> + 'k {
        self.attributes
            .iter()
            .filter(move |k| k.kind == kind)
            .map(|k| k.key.as_str())
    }
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
    fn reads_in_lists() {
        assert_eq!(
            parse("attr.family not in (code, \"math word\", 3)").test,
            Test::In {
                negated: true,
                values: vec![
                    Value::Text("code".into()),
                    Value::Text("math word".into()),
                    Value::Number(3.0)
                ]
            }
        );
        assert_eq!(
            parse("attr.family in(\"a\\\"b\", c)").test,
            Test::In {
                negated: false,
                values: vec![Value::Text("a\"b".into()), Value::Text("c".into())]
            }
        );
        let many = format!("attr.a in ({})", vec!["x"; 21].join(", "));
        assert!(TraceFilter::parse(&many).is_err());
    }

    #[test]
    fn reads_span_fields() {
        assert_eq!(parse("span.name = a").field, Field::Span(SpanField::Name));
        assert_eq!(
            parse("span.kind = tool").field,
            Field::Span(SpanField::Kind)
        );
        assert_eq!(
            parse("span.status = error").field,
            Field::Span(SpanField::Status)
        );
        assert_eq!(
            parse("span.error_type = EpisodeAborted").field,
            Field::Span(SpanField::ErrorType)
        );
        assert_eq!(
            parse("span.attr.tool.name exists").field,
            Field::Span(SpanField::Attr("tool.name".into()))
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
            ("span.size > 1", "not a span field"),
            ("span.attr. exists", "attribute name"),
            ("span.kind = robot", "span.kind \"robot\" is not a valid"),
            ("span.status = fine", "span.status \"fine\" is not a valid"),
            ("attr.a in ()", "at least one value"),
            ("attr.a in (x, )", "ends with a comma"),
            ("attr.a in (x y)", "double-quoted"),
            ("attr.a not in x", "operator"),
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
            "span.name = physics.integrate",
            "span.name != \"env step 3\"",
            "span.kind = tool",
            "span.status = error",
            "span.error_type = FloatingPointError",
            "span.attr.gen_ai.usage.output_tokens > 100",
            "span.attr.cached exists",
            "attr.family in (code, \"a, b\", \"x)\")",
            "attr.family not in (math, 12, true)",
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
