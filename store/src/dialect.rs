//! What differs between the two databases' SQL, named in one place. Everything else
//! in the store is written once, generic over [`Dialect`].

use std::fmt::Write as _;
use std::future::Future;
use std::marker::PhantomData;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Pool, Postgres, Sqlite};

use super::body_text::{BodySearch, Doc, TraceKey};
use super::columns::{BindColumn as _, Column};
use super::rows::DbRow;

/// One bound value. Values are bound where the database is a concrete type, so
/// generic code needs no per-type encoding bounds.
#[derive(Debug)]
pub enum Arg<'a> {
    Owned(String),
    Int(i64),
    OptInt(Option<i64>),
    Float(f64),
    OptFloat(Option<f64>),
    Bool(bool),
    Text(&'a str),
    OptText(Option<&'a str>),
    OptBytes(Option<&'a [u8]>),
    /// A whole column of rows, as one array ([`Dialect::ROWS_AS_ARRAYS`]).
    Column(Column<'a>),
}

/// `From` each owned value kind into its [`Arg`].
macro_rules! arg_from {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for Arg<'_> {
            fn from(v: $ty) -> Self {
                Arg::$variant(v)
            }
        }
    )*};
}

arg_from!(
    String => Owned,
    i64 => Int,
    Option<i64> => OptInt,
    f64 => Float,
    Option<f64> => OptFloat,
    bool => Bool,
);

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(v)
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(v)
    }
}
impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::OptText(v)
    }
}
impl<'a> From<Option<&'a [u8]>> for Arg<'a> {
    fn from(v: Option<&'a [u8]>) -> Self {
        Arg::OptBytes(v)
    }
}
impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::OptText(v.as_deref())
    }
}

/// `sqlx::query` of a [`Sql`]'s text with its arguments bound by reference (an
/// owned text is not copied again), on a concrete database. The arguments are
/// reserved at their full count first: a batch's upsert binds tens of thousands, and
/// growing the list one at a time copied it over and over.
macro_rules! bound_query {
    ($sql:expr, $args:ty) => {{
        let mut args = <$args>::default();
        sqlx::Arguments::reserve(&mut args, $sql.args.len(), 0);
        for arg in &$sql.args {
            match arg {
                Arg::Owned(v) => sqlx::Arguments::add(&mut args, v.as_str()),
                Arg::Int(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::OptInt(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::Float(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::OptFloat(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::Bool(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::Text(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::OptText(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::OptBytes(v) => sqlx::Arguments::add(&mut args, *v),
                Arg::Column(c) => args.add_column(c),
            }
            .map_err(sqlx::Error::Encode)?;
        }
        Ok(sqlx::query_with(&$sql.text, args))
    }};
}

/// The execution methods of [`Dialect`], the same text for each database.
macro_rules! execution {
    ($row:ty, $conn:ty) => {
        async fn fetch_all<'e>(
            pool: &'e Pool<Self>,
            sql: Sql<'e, Self>,
        ) -> Result<Vec<$row>, sqlx::Error> {
            sql.query()?.fetch_all(pool).await
        }

        async fn fetch_all_in<'e>(
            conn: &'e mut $conn,
            sql: Sql<'e, Self>,
        ) -> Result<Vec<$row>, sqlx::Error> {
            sql.query()?.fetch_all(conn).await
        }

        async fn execute<'e>(conn: &'e mut $conn, sql: Sql<'e, Self>) -> Result<u64, sqlx::Error> {
            Ok(sql.query()?.execute(conn).await?.rows_affected())
        }
    };
}

/// A statement being written: its text, with the dialect's placeholders, and its
/// arguments. Plain data, so generic code can hold it across an await.
pub struct Sql<'a, DB> {
    text: String,
    args: Vec<Arg<'a>>,
    db: PhantomData<fn() -> DB>,
}

impl<'a, DB: Dialect> Sql<'a, DB> {
    pub fn new(text: impl Into<String>) -> Self {
        Sql {
            text: text.into(),
            args: Vec::new(),
            db: PhantomData,
        }
    }

    pub fn push(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.text.push_str(text.as_ref());
        self
    }

    /// Room for `args` more arguments and `text` more bytes of text.
    pub fn reserve(&mut self, args: usize, text: usize) {
        self.args.reserve(args);
        self.text.reserve(text);
    }

    /// Writes a placeholder for `arg` and binds it.
    pub fn bind(&mut self, arg: impl Into<Arg<'a>>) -> &mut Self {
        self.args.push(arg.into());
        DB::placeholder(self.args.len(), &mut self.text);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

impl Sql<'_, Sqlite> {
    /// The sqlx query, bound; an argument that cannot be encoded is an error.
    pub fn query(&self) -> Result<Query<'_, Sqlite, SqliteArguments<'_>>, sqlx::Error> {
        bound_query!(self, SqliteArguments<'_>)
    }
}

impl Sql<'_, Postgres> {
    /// The sqlx query, bound; an argument that cannot be encoded is an error.
    pub fn query(&self) -> Result<Query<'_, Postgres, PgArguments>, sqlx::Error> {
        bound_query!(self, PgArguments)
    }
}

/// How a database reads the pairs of a JSON array parameter ([`Dialect::JSON_PAIRS`]).
pub struct JsonPairs {
    pub before: &'static str,
    pub after: &'static str,
    pub index: &'static str,
    pub first: &'static str,
    pub second: &'static str,
    pub join: &'static str,
    pub array: &'static str,
    pub differs: &'static str,
}

pub trait Dialect: sqlx::Database<Row: DbRow> {
    /// A pattern match that ignores ASCII case (SQLite's LIKE already does).
    const LIKE_ANY_CASE: &'static str;
    /// The larger of two values (SQLite's two-argument MAX).
    const GREATEST: &'static str;
    /// The smaller of two values: `MIN` on SQLite, `LEAST` on PostgreSQL.
    const LEAST: &'static str;
    /// Whether a scan over a whole run goes faster cut in two halves read at once:
    /// SQLite reads a query on one core; PostgreSQL's own parallel plans would build
    /// their hash tables once a half.
    const SCAN_IN_HALVES: bool;
    /// Whether a write binds its rows as one array a column (`UNNEST`) rather than a
    /// placeholder a value (`VALUES`): PostgreSQL then plans a batch's statement
    /// once, where thousands of placeholders cost a parse and a plan every time.
    const ROWS_AS_ARRAYS: bool;
    /// Whether a subquery in FROM may read the tables before it (`CROSS JOIN
    /// LATERAL`): then a per-trace aggregate can be asked for a trace at a time.
    const LATERAL: bool;
    /// Locks the rows a SELECT reads until the transaction ends. SQLite has one
    /// writer at a time, so it needs none.
    const FOR_UPDATE: &'static str;
    /// Ends a correlated subquery so that it runs for each outer row, as written:
    /// PostgreSQL otherwise may turn an `EXISTS` into a join that first gathers
    /// every row the subquery could match. SQLite runs it per row already.
    const PER_ROW: &'static str;
    /// Written after a text expression so that `<` and `>=` compare bytes, as an
    /// index on the same expression is ordered (PostgreSQL's locale may not).
    const BYTE_ORDER: &'static str;
    /// Whether a body search first tests the newest traces of its scope, to skip
    /// counting the matches of a word most traces hold (`Reader::mostly_matching`):
    /// SQLite counts them from the index alone, quickly.
    const PROBE_COMMON_TEXT: bool;
    /// Whether a span number's equality reads `span_ranges` in two parts (by
    /// greatest value, then the rows whose values differ, by least: SQLite's
    /// `span_ranges_spread`). PostgreSQL reads both indexes of one table at once;
    /// given the parts' union, it scanned the whole of it for each trace of a page.
    const SPLIT_EQUALITY: bool;
    /// Whether a span string's `!=`, `not in` or order is found through
    /// `span_texts` (`span_texts::Unlisted`). PostgreSQL, for a common one, probed
    /// that table a trace at a time through its key, where the trace comes after
    /// the value (313 ms for a page, as slow as reading the spans), so it reads the
    /// spans.
    const SEEK_UNLISTED_STRINGS: bool;
    /// How far a read replica's replay is behind its primary, in milliseconds
    /// (`lag_ms`): 0 when it has replayed all it received.
    const REPLICA_LAG_MS: &'static str;
    /// One row, `used`: the bytes the database's tables and indexes take.
    const USED_BYTES: &'static str;
    /// One row, `free`: bytes the database holds free for reuse.
    const FREE_BYTES: &'static str;
    /// A row per table and index, `name` and `bytes` (a table's with its TOAST on
    /// PostgreSQL, without its indexes), largest first. Reads every page on SQLite.
    const TABLE_BYTES: &'static str;
    /// `SELECT` the `span_texts` rows (run, code, value, trace) of the string
    /// attributes of spans `s`, up to `WHERE … AND `, which the caller ends with
    /// the spans' condition.
    const SPAN_TEXT_ROWS: &'static str;

    /// A search term in the case of `lower()`, the database's own (SQLite's folds
    /// ASCII only).
    fn fold_case(term: &str) -> String;

    /// Written after a table's name: read it through `index`. SQLite, without
    /// statistics, takes an equality on another index's column over a range on this
    /// one (a prefix search read a project's every trace: 6 s); PostgreSQL plans by
    /// its statistics.
    fn use_index(index: &str) -> String;

    /// Written after a table's name: read it through its primary key. On SQLite a
    /// table without a rowid is its primary key, which `NOT INDEXED` leaves as the
    /// only way in.
    fn by_primary_key() -> &'static str;

    /// Writes the placeholder of the `n`th argument (from 1).
    fn placeholder(n: usize, out: &mut String);

    /// Every row `sql` answers.
    fn fetch_all<'e>(
        pool: &'e Pool<Self>,
        sql: Sql<'e, Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'e;

    /// Every row `sql` answers, on a connection (inside a transaction, say).
    fn fetch_all_in<'e>(
        conn: &'e mut Self::Connection,
        sql: Sql<'e, Self>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send + 'e;

    /// Runs `sql` (one statement) and answers how many rows it changed.
    fn execute<'e>(
        conn: &'e mut Self::Connection,
        sql: Sql<'e, Self>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'e;

    /// Makes the other writers of `run_id` wait until this transaction ends, so
    /// read-modify-writes of its counters never lose an update. SQLite has one
    /// writer at a time already.
    fn lock_run<'e>(
        conn: &'e mut Self::Connection,
        run_id: &'e str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'e;

    /// The member `key` of the JSON object text `doc` as a floating-point number (an
    /// integer too); NULL when it is missing or not a number.
    fn push_attr_number<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str);
    /// The member as a string (compared byte by byte); NULL unless a string.
    fn push_attr_text<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str);
    /// Whether the member is the boolean `value`.
    fn push_attr_is<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str, value: bool);
    /// Whether the member is there and not null.
    fn push_attr_exists<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str);
    /// A span's attributes column `doc`, keyed by code, as JSON object text keyed by
    /// name ([`crate::attribute_codes`]).
    fn named_attributes(doc: &str) -> String;
    /// A text column compared byte by byte, as [`Dialect::push_attr_text`] compares.
    fn push_bytewise<'a>(q: &mut Sql<'a, Self>, column: &'static str);
    /// Whether the JSON object in column `doc` has the member named by the value of
    /// column `name` (null or not).
    fn push_has_member<'a>(q: &mut Sql<'a, Self>, doc: &str, name: &str);
    /// A table of the run's traces' root attributes, `(trace, key, kind, num, text)`:
    /// kind `number`, `string` or `boolean`, with the value as a number (numbers) or
    /// text (strings and booleans); `num` is floating-point, an integer too.
    fn push_attr_rows<'a>(q: &mut Sql<'a, Self>, run_id: &'a str) {
        let m = Self::MEMBERS;
        q.push(format!(
            "(SELECT t.trace_id AS trace, a.key AS key, {values}
                FROM traces t{each}
               WHERE {types} AND t.run_id = ",
            values = m.values,
            each = m.each,
            types = m.types,
        ))
        .bind(run_id)
        .push(")");
    }
    /// The same table of the attributes of a sample of the run's spans: its first
    /// `sample` spans in key order (whole traces, but for the last), named.
    fn push_span_attr_rows<'a>(q: &mut Sql<'a, Self>, run_id: &'a str, sample: i64) {
        let m = Self::MEMBERS;
        q.push(format!(
            "(SELECT t.trace_id AS trace, n.name AS key, {values}
                FROM (SELECT trace_id, attributes FROM spans WHERE run_id = ",
            values = m.values,
        ))
        .bind(run_id)
        .push(" ORDER BY trace_id, span_id LIMIT ")
        .bind(sample)
        .push(format!(
            ") t{each} JOIN attribute_names n ON n.code = {code} WHERE {types})",
            each = m.each,
            code = m.code,
            types = m.types,
        ));
    }
    /// How the two tables above read the members `a` of a JSON object column
    /// `t.attributes`.
    const MEMBERS: JsonMembers;

    /// Whether span `s`'s error body is an object whose `type` is the string `text`,
    /// written as the index `spans_run_error_type` is.
    fn push_error_type_is<'a>(q: &mut Sql<'a, Self>, text: &'a str);
    /// Whether text `column` holds an ASCII digit.
    fn has_digit(column: &str) -> String;

    /// `old` JSON object text with `new`'s keys laid over it.
    fn json_merge(old: &str, new: &str) -> String;

    /// The function that builds a JSON array, and how a column of JSON text goes
    /// into it as JSON (not as a string): `{}` stands for the column.
    const JSON_ARRAY: (&'static str, &'static str);

    /// The JSON array text of `value` (a call that builds JSON, such as
    /// [`Dialect::JSON_ARRAY`]'s) over the rows, in `order`; `[]` for none.
    fn json_array_agg(value: &str, order: &str) -> String;
    /// The JSON text of the value at `path` (keys, outermost first) in the JSON
    /// text column `doc`; NULL where there is none.
    fn push_json_at<'a>(q: &mut Sql<'a, Self>, doc: &str, path: &[String]);
    /// The number the JSON text `value` holds, as a float; NULL for anything else.
    fn json_number(value: &str) -> String;
    /// What the JSON text `value` holds as text to sort by: a string's own text,
    /// other values' JSON text; NULL for a number, `null` or none.
    fn json_sort_text(value: &str) -> String;
    /// An aggregate of the floating-point `value`s as text, `,` apart, each written
    /// so that it reads back as the same number.
    fn number_list(value: &str) -> String;
    /// An aggregate of the texts `value` (none holding a `,`), `,` apart, in the
    /// order the rows arrive: the same as [`Dialect::number_list`]'s in one query.
    fn text_list(value: &str) -> String;
    /// Several values of one row as one text, `,` apart: `ints` first, then
    /// `floats`, each written so that it reads back as the same number. A subquery
    /// returns one column; this is how it returns several.
    fn packed(ints: &[&str], floats: &[&str]) -> String;

    /// The elements of a bound JSON array of pairs as rows `k`: the text before and
    /// after the parameter, then each row's index (from 0), first and second member;
    /// the join that keeps them the outer loop; the function that builds a JSON
    /// array; the operator "is not the same as" for nullable values.
    const JSON_PAIRS: JsonPairs;

    /// The recursive step of a walk over a trace's spans: for each row of the
    /// working table `outer`, the spans `s` of the run's trace meeting `condition`,
    /// as `columns`. Each step must stay a key probe: PostgreSQL, given a plain
    /// join, planned a walk of the whole trace at each level.
    fn push_each_span<'a>(
        q: &mut Sql<'a, Self>,
        outer: &str,
        columns: &str,
        run_id: &'a str,
        trace_id: &'a str,
        condition: &str,
    );

    /// `FROM … WHERE …` of the body documents `d` (`run_id`, `trace_id`, `span_id`,
    /// `field`) whose words match `search` in its scope, read from the index.
    fn push_docs_matching(q: &mut Sql<'_, Self>, search: &BodySearch<'_>);
    /// `FROM … WHERE …` of the index's entries matching `search` in its scope,
    /// without reading the documents' keys: for counting.
    fn push_index_matching(q: &mut Sql<'_, Self>, search: &BodySearch<'_>);
    /// The table of body documents, with `run_id`, `trace_id`, `span_id`, `field`.
    const BODY_DOCS: &'static str;
    /// The statements that write `docs`, the body documents of spans of `run_id`.
    fn push_docs_upsert<'a>(
        q: &mut Sql<'a, Self>,
        run_id: &'a str,
        project: &'a str,
        docs: &'a [Doc<'a>],
    );
    /// `FROM … WHERE …` of the documents `d` of one trace whose words match `search`.
    fn push_trace_docs_matching<'a>(
        q: &mut Sql<'a, Self>,
        search: &BodySearch<'_>,
        trace: TraceKey<'a>,
    );
}

/// SQLite's JSON path of a top-level key, quoted so that a dotted name is one key.
/// (Filter parsing keeps `"` out of names.)
fn json_path(key: &str) -> String {
    format!("$.\"{key}\"")
}

/// A JSON object column that filters read a member of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonDoc {
    /// A trace's root attributes, keyed by name.
    RootAttributes,
    /// A span's attributes, keyed by code ([`crate::attribute_codes`]).
    SpanAttributes,
    /// A span's error body.
    SpanError,
}

impl std::fmt::Display for JsonDoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JsonDoc::RootAttributes => "t.attributes",
            JsonDoc::SpanAttributes => "s.attributes",
            JsonDoc::SpanError => "s.error",
        })
    }
}

/// SQLite's path to member `key` of `doc`: a span's attributes look its code up
/// (no code, a NULL path, matches nothing); other documents bind the name.
fn push_path<'a>(q: &mut Sql<'a, Sqlite>, doc: JsonDoc, key: &'a str) {
    if doc == JsonDoc::SpanAttributes {
        q.push("(SELECT '$.\"' || code || '\"' FROM attribute_names WHERE name = ")
            .bind(key)
            .push(")");
    } else {
        q.bind(json_path(key));
    }
}

/// PostgreSQL's key of member `key` of `doc`, as [`push_path`] finds it.
fn push_key<'a>(q: &mut Sql<'a, Postgres>, doc: JsonDoc, key: &'a str) {
    if doc == JsonDoc::SpanAttributes {
        q.push("(SELECT code::text FROM attribute_names WHERE name = ")
            .bind(key)
            .push(")");
    } else {
        q.bind(key);
    }
}

/// How a database reads the members `a` of a JSON object column `t.attributes`
/// ([`Dialect::MEMBERS`]).
pub struct JsonMembers {
    /// Joined after the table: the members as rows.
    each: &'static str,
    /// A member's key as an attribute code.
    code: &'static str,
    /// Its `kind`, `num` and `text`, as [`Dialect::push_attr_rows`] gives them.
    values: &'static str,
    /// The member types that make a row: numbers, strings and booleans.
    types: &'static str,
}

impl Dialect for Sqlite {
    const BODY_DOCS: &'static str = "span_docs";
    const MEMBERS: JsonMembers = JsonMembers {
        each: ", json_each(t.attributes) a",
        code: "CAST(a.key AS INTEGER)",
        values: "CASE a.type WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number'
                             WHEN 'text' THEN 'string' ELSE 'boolean' END AS kind,
                 CASE WHEN a.type IN ('integer', 'real') THEN CAST(a.value AS REAL) END AS num,
                 CASE a.type WHEN 'text' THEN a.value WHEN 'true' THEN 'true'
                             WHEN 'false' THEN 'false' END AS text",
        types: "a.type IN ('integer', 'real', 'text', 'true', 'false')",
    };
    const LIKE_ANY_CASE: &'static str = "LIKE";
    const GREATEST: &'static str = "MAX";
    const LEAST: &'static str = "MIN";
    const SCAN_IN_HALVES: bool = true;
    const ROWS_AS_ARRAYS: bool = false;
    const LATERAL: bool = false;
    const FOR_UPDATE: &'static str = "";
    const PER_ROW: &'static str = "";
    const BYTE_ORDER: &'static str = "";
    const PROBE_COMMON_TEXT: bool = false;
    const SPLIT_EQUALITY: bool = true;
    const SEEK_UNLISTED_STRINGS: bool = true;
    // SQLite has no replicas; a SQLite reader is never made one.
    const REPLICA_LAG_MS: &'static str = "SELECT CAST(0 AS BIGINT) AS lag_ms";
    const USED_BYTES: &'static str =
        "SELECT (p.page_count - f.freelist_count) * s.page_size AS used \
         FROM pragma_page_count() AS p, pragma_freelist_count() AS f, pragma_page_size() AS s";
    const FREE_BYTES: &'static str = "SELECT f.freelist_count * s.page_size AS free \
         FROM pragma_freelist_count() AS f, pragma_page_size() AS s";
    const SPAN_TEXT_ROWS: &'static str =
        "SELECT s.run_id, CAST(a.key AS INTEGER), a.value, s.trace_id \
         FROM spans s, json_each(s.attributes) AS a WHERE a.type = 'text' AND ";
    const TABLE_BYTES: &'static str = "SELECT name, SUM(pgsize) AS bytes FROM dbstat \
         GROUP BY name ORDER BY SUM(pgsize) DESC, name";
    const JSON_ARRAY: (&'static str, &'static str) = ("json_array", "json({})");
    // CROSS JOIN keeps the pairs as the outer loop: two key probes each.
    const JSON_PAIRS: JsonPairs = JsonPairs {
        before: "json_each(",
        after: ") AS k",
        index: "CAST(k.key AS INTEGER)",
        first: "k.value ->> 0",
        second: "k.value ->> 1",
        join: "CROSS JOIN",
        array: "json_array",
        differs: "IS NOT",
    };

    fn fold_case(term: &str) -> String {
        term.to_ascii_lowercase()
    }

    fn use_index(index: &str) -> String {
        format!(" INDEXED BY {index}")
    }

    fn by_primary_key() -> &'static str {
        " NOT INDEXED"
    }

    fn has_digit(column: &str) -> String {
        format!("{column} GLOB '*[0-9]*'")
    }

    fn push_error_type_is<'a>(q: &mut Sql<'a, Self>, text: &'a str) {
        // A number or a boolean `type` never equals text; a body that is not an
        // object has no `type`.
        q.push(
            "s.error IS NOT NULL AND \
             (CASE WHEN json_valid(s.error) THEN json_extract(s.error, '$.type') END) = ",
        )
        .bind(text);
    }

    fn placeholder(_: usize, out: &mut String) {
        out.push('?');
    }

    execution!(SqliteRow, sqlx::SqliteConnection);

    async fn lock_run<'e>(
        _conn: &'e mut sqlx::SqliteConnection,
        _run_id: &'e str,
    ) -> Result<(), sqlx::Error> {
        Ok(())
    }

    fn json_merge(old: &str, new: &str) -> String {
        format!("json_patch({old}, {new})")
    }

    fn push_json_at<'a>(q: &mut Sql<'a, Self>, doc: &str, path: &[String]) {
        // Path keys are letters, digits, `_`, `-` and `/` (wire::run_list), so
        // quoting each needs no escapes.
        let path: String = path.iter().map(|k| format!(".\"{k}\"")).collect();
        q.push(format!("({doc} -> "))
            .bind(format!("${path}"))
            .push(")");
    }

    fn json_number(value: &str) -> String {
        format!(
            "CASE WHEN json_type({value}) IN ('integer', 'real') \
             THEN CAST(json_extract({value}, '$') AS REAL) END"
        )
    }

    fn json_sort_text(value: &str) -> String {
        format!(
            "CASE json_type({value}) WHEN 'text' THEN json_extract({value}, '$') \
             WHEN 'integer' THEN NULL WHEN 'real' THEN NULL WHEN 'null' THEN NULL \
             ELSE {value} END"
        )
    }

    fn json_array_agg(value: &str, order: &str) -> String {
        format!("json_group_array({value} ORDER BY {order})")
    }

    // 17 digits: SQLite's own text for a REAL keeps only 15. The CASE: printf
    // writes a NULL as 0.
    fn number_list(value: &str) -> String {
        format!(
            "group_concat(CASE WHEN {value} IS NOT NULL THEN printf('%!.17g', {value}) END, ',')"
        )
    }

    fn text_list(value: &str) -> String {
        format!("group_concat({value}, ',')")
    }

    fn packed(ints: &[&str], floats: &[&str]) -> String {
        let pattern: Vec<&str> = ints
            .iter()
            .map(|_| "%d")
            .chain(floats.iter().map(|_| "%!.17g"))
            .collect();
        let args: Vec<&str> = ints.iter().chain(floats).copied().collect();
        format!("printf('{}', {})", pattern.join(","), args.join(", "))
    }

    fn push_attr_number<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str) {
        q.push(format!("CASE WHEN json_type({doc}, "));
        push_path(q, doc, key);
        q.push(format!(
            ") IN ('integer', 'real') THEN CAST(json_extract({doc}, "
        ));
        push_path(q, doc, key);
        // REAL: SQLite keeps 0 and 0.5 apart as INTEGER and REAL.
        q.push(") AS REAL) END");
    }

    fn push_attr_text<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str) {
        q.push(format!("CASE WHEN json_type({doc}, "));
        push_path(q, doc, key);
        q.push(format!(") = 'text' THEN json_extract({doc}, "));
        push_path(q, doc, key);
        q.push(") END");
    }

    fn push_attr_is<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str, value: bool) {
        q.push(format!("json_type({doc}, "));
        push_path(q, doc, key);
        q.push(if value { ") = 'true'" } else { ") = 'false'" });
    }

    fn push_attr_exists<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str) {
        q.push(format!("COALESCE(json_type({doc}, "));
        push_path(q, doc, key);
        q.push("), 'null') <> 'null'");
    }

    fn named_attributes(doc: &str) -> String {
        // `->` hands each value over as its JSON text; CROSS JOIN keeps its order.
        format!(
            "(SELECT json_group_object(n.name, {doc} -> a.fullkey) FROM json_each({doc}) AS a \
             CROSS JOIN attribute_names n ON n.code = CAST(a.key AS INTEGER))"
        )
    }

    fn push_bytewise<'a>(q: &mut Sql<'a, Self>, column: &'static str) {
        // SQLite's default collation compares bytes.
        q.push(column);
    }

    fn push_has_member<'a>(q: &mut Sql<'a, Self>, doc: &str, name: &str) {
        q.push(format!(
            "json_type({doc}, '$.\"' || {name} || '\"') IS NOT NULL"
        ));
    }

    fn push_each_span<'a>(
        q: &mut Sql<'a, Self>,
        outer: &str,
        _columns: &str,
        run_id: &'a str,
        trace_id: &'a str,
        condition: &str,
    ) {
        q.push(format!("spans s JOIN {outer} ON s.run_id = "))
            .bind(run_id)
            .push(" AND s.trace_id = ")
            .bind(trace_id)
            .push(format!(" AND {condition}"));
    }

    // The index leads (CROSS JOIN keeps it first): a match, then its document's key.
    fn push_docs_matching(q: &mut Sql<'_, Self>, search: &BodySearch<'_>) {
        q.push(
            "FROM span_words w CROSS JOIN span_docs d ON d.doc = w.rowid WHERE span_words MATCH ",
        )
        .bind(search.fts5(true));
    }

    fn push_index_matching(q: &mut Sql<'_, Self>, search: &BodySearch<'_>) {
        q.push("FROM span_words WHERE span_words MATCH ")
            .bind(search.fts5(true));
    }

    fn push_docs_upsert<'a>(
        q: &mut Sql<'a, Self>,
        run_id: &'a str,
        project: &'a str,
        docs: &'a [Doc<'a>],
    ) {
        super::body_text::sqlite_upsert(q, run_id, project, docs);
    }

    // One read of the index a trace, over the range of its documents' keys (a
    // trace's documents are written together): a read per document cost 0.1–0.4 ms.
    fn push_trace_docs_matching<'a>(
        q: &mut Sql<'a, Self>,
        search: &BodySearch<'_>,
        trace: TraceKey<'a>,
    ) {
        // The index leads, once, over the range; each row it yields is a probe of
        // the documents' key. (Led by the documents, it was read once a document.)
        q.push(
            "FROM span_words w CROSS JOIN span_docs d ON d.doc = w.rowid WHERE span_words MATCH ",
        )
        .bind(search.fts5(false))
        .push(" AND w.rowid >= (SELECT MIN(x.doc) FROM span_docs x WHERE ");
        trace.push(q, "x");
        q.push(") AND w.rowid <= (SELECT MAX(x.doc) FROM span_docs x WHERE ");
        trace.push(q, "x");
        q.push(") AND ");
        trace.push(q, "d");
    }
}

impl Dialect for Postgres {
    const BODY_DOCS: &'static str = "span_words";
    const MEMBERS: JsonMembers = JsonMembers {
        each: " CROSS JOIN LATERAL jsonb_each(t.attributes::jsonb) a",
        code: "a.key::bigint",
        values: "jsonb_typeof(a.value) AS kind,
                 CASE jsonb_typeof(a.value) WHEN 'number' THEN (a.value #>> '{}')::float8 END AS num,
                 CASE WHEN jsonb_typeof(a.value) IN ('string', 'boolean') THEN a.value #>> '{}' END AS text",
        types: "jsonb_typeof(a.value) IN ('number', 'string', 'boolean')",
    };
    const LIKE_ANY_CASE: &'static str = "ILIKE";
    const GREATEST: &'static str = "GREATEST";
    const LEAST: &'static str = "LEAST";
    const SCAN_IN_HALVES: bool = false;
    const ROWS_AS_ARRAYS: bool = true;
    const LATERAL: bool = true;
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const PER_ROW: &'static str = " OFFSET 0";
    const BYTE_ORDER: &'static str = " COLLATE \"C\"";
    const PROBE_COMMON_TEXT: bool = true;
    const SPLIT_EQUALITY: bool = false;
    const SEEK_UNLISTED_STRINGS: bool = false;
    // A standby that has replayed every record it received is current; otherwise it
    // is as far behind as its last replayed commit. On a server not in recovery
    // both functions are NULL, which reads as 0.
    const REPLICA_LAG_MS: &'static str = "SELECT CAST(CASE \
         WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 \
         ELSE COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()) \
         * 1000, 0) END AS BIGINT) AS lag_ms";
    // Tables with their indexes and TOAST, in the schema the store uses.
    const USED_BYTES: &'static str =
        "SELECT CAST(COALESCE(SUM(pg_total_relation_size(c.oid)), 0) AS BIGINT) AS used \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r'";
    const FREE_BYTES: &'static str = "SELECT CAST(0 AS BIGINT) AS free";
    // `json`: a string holding \u0000, which no text can hold, is left out before
    // it is read as text.
    const SPAN_TEXT_ROWS: &'static str =
        "SELECT s.run_id, CAST(a.key AS BIGINT), a.value #>> '{}', s.trace_id \
         FROM spans s, json_each(s.attributes::json) AS a \
         WHERE json_typeof(a.value) = 'string' AND strpos(a.value::text, '\\u0000') = 0 AND ";
    const TABLE_BYTES: &'static str = "SELECT c.relname AS name, CAST(CASE c.relkind \
         WHEN 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END AS BIGINT) AS bytes \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i') \
         ORDER BY 2 DESC, 1";
    const JSON_ARRAY: (&'static str, &'static str) = ("json_build_array", "({})::json");
    const JSON_PAIRS: JsonPairs = JsonPairs {
        before: "jsonb_array_elements(",
        after: "::jsonb) WITH ORDINALITY AS k(pair, i)",
        index: "k.i - 1",
        first: "k.pair ->> 0",
        second: "k.pair ->> 1",
        join: "JOIN",
        array: "json_build_array",
        differs: "IS DISTINCT FROM",
    };

    fn fold_case(term: &str) -> String {
        term.to_lowercase()
    }

    fn use_index(_: &str) -> String {
        String::new()
    }

    fn by_primary_key() -> &'static str {
        ""
    }

    fn has_digit(column: &str) -> String {
        format!("{column} ~ '[0-9]'")
    }

    fn push_error_type_is<'a>(q: &mut Sql<'a, Self>, text: &'a str) {
        q.push(
            "s.error IS NOT NULL AND jsonb_typeof(s.error::jsonb -> 'type') = 'string' \
             AND (s.error::jsonb ->> 'type') COLLATE \"C\" = ",
        )
        .bind(text);
    }

    fn placeholder(n: usize, out: &mut String) {
        let _ = write!(out, "${n}"); // writing to a String cannot fail
    }

    execution!(PgRow, sqlx::PgConnection);

    async fn lock_run<'e>(
        conn: &'e mut sqlx::PgConnection,
        run_id: &'e str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(run_id)
            .execute(conn)
            .await?;
        Ok(())
    }

    fn json_merge(old: &str, new: &str) -> String {
        format!("({old}::jsonb || {new}::jsonb)::text")
    }

    fn push_json_at<'a>(q: &mut Sql<'a, Self>, doc: &str, path: &[String]) {
        q.push(format!("(({doc})::jsonb #> string_to_array("))
            .bind(path.join("."))
            .push(", '.'))::text");
    }

    fn json_number(value: &str) -> String {
        format!(
            "CASE WHEN jsonb_typeof(({value})::jsonb) = 'number' \
             THEN (({value})::jsonb)::float8 END"
        )
    }

    fn json_sort_text(value: &str) -> String {
        format!(
            "(CASE jsonb_typeof(({value})::jsonb) WHEN 'string' THEN ({value})::jsonb #>> '{{}}' \
             WHEN 'number' THEN NULL WHEN 'null' THEN NULL ELSE {value} END) COLLATE \"C\""
        )
    }

    fn json_array_agg(value: &str, order: &str) -> String {
        format!("COALESCE(json_agg({value} ORDER BY {order}), '[]')::text")
    }

    // PostgreSQL writes a double's shortest exact text.
    fn number_list(value: &str) -> String {
        format!("string_agg(CAST({value} AS TEXT), ',')")
    }

    fn text_list(value: &str) -> String {
        format!("string_agg({value}, ',')")
    }

    // A float8's text is its shortest exact form (PostgreSQL 12 and later).
    fn packed(ints: &[&str], floats: &[&str]) -> String {
        let args: Vec<String> = ints
            .iter()
            .chain(floats)
            .map(|v| format!("CAST({v} AS TEXT)"))
            .collect();
        format!("concat_ws(',', {})", args.join(", "))
    }

    // CASE, not AND: PostgreSQL may evaluate AND's sides in either order, and the
    // cast must never see a string. `json`, not `jsonb`, where a member is read
    // out: the text is only scanned, not built into a document (half the time on a
    // run's scan).
    fn push_attr_number<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str) {
        q.push(format!("CASE WHEN json_typeof({doc}::json -> "));
        push_key(q, doc, key);
        q.push(format!(") = 'number' THEN ({doc}::json ->> "));
        push_key(q, doc, key);
        q.push(")::float8 END");
    }

    fn push_attr_text<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str) {
        q.push(format!("CASE WHEN json_typeof({doc}::json -> "));
        push_key(q, doc, key);
        q.push(format!(") = 'string' THEN ({doc}::json ->> "));
        push_key(q, doc, key);
        q.push(") END COLLATE \"C\"");
    }

    fn push_attr_is<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str, value: bool) {
        q.push(format!("({doc}::jsonb -> "));
        push_key(q, doc, key);
        q.push(if value {
            ") = 'true'::jsonb"
        } else {
            ") = 'false'::jsonb"
        });
    }

    fn push_attr_exists<'a>(q: &mut Sql<'a, Self>, doc: JsonDoc, key: &'a str) {
        q.push(format!("COALESCE(jsonb_typeof({doc}::jsonb -> "));
        push_key(q, doc, key);
        q.push("), 'null') <> 'null'");
    }

    fn named_attributes(doc: &str) -> String {
        // `json`, not `jsonb`: the names stay in the order they were stored in.
        format!(
            "COALESCE((SELECT json_object_agg(n.name, a.value ORDER BY a.at) \
             FROM json_each({doc}::json) WITH ORDINALITY AS a(key, value, at) \
             JOIN attribute_names n ON n.code = a.key::bigint)::text, '{{}}')"
        )
    }

    fn push_bytewise<'a>(q: &mut Sql<'a, Self>, column: &'static str) {
        q.push(format!("{column} COLLATE \"C\""));
    }

    fn push_has_member<'a>(q: &mut Sql<'a, Self>, doc: &str, name: &str) {
        // `json`, not `jsonb`: a string holding \u0000 stays readable.
        q.push(format!("({doc}::json -> ({name})::text) IS NOT NULL"));
    }

    fn push_each_span<'a>(
        q: &mut Sql<'a, Self>,
        outer: &str,
        columns: &str,
        run_id: &'a str,
        trace_id: &'a str,
        condition: &str,
    ) {
        // A LATERAL subquery with OFFSET 0 cannot be flattened into a join.
        q.push(format!(
            "{outer} CROSS JOIN LATERAL (SELECT {columns} FROM spans s WHERE s.run_id = "
        ))
        .bind(run_id)
        .push(" AND s.trace_id = ")
        .bind(trace_id)
        .push(format!(" AND {condition} OFFSET 0) s"));
    }

    fn push_docs_matching(q: &mut Sql<'_, Self>, search: &BodySearch<'_>) {
        q.push("FROM span_words d WHERE d.words @@ ")
            .bind(search.tsquery(true))
            .push("::tsquery");
    }

    fn push_index_matching(q: &mut Sql<'_, Self>, search: &BodySearch<'_>) {
        Self::push_docs_matching(q, search);
    }

    fn push_docs_upsert<'a>(
        q: &mut Sql<'a, Self>,
        run_id: &'a str,
        project: &'a str,
        docs: &'a [Doc<'a>],
    ) {
        super::body_text::postgres_upsert(q, run_id, project, docs);
    }

    fn push_trace_docs_matching<'a>(
        q: &mut Sql<'a, Self>,
        search: &BodySearch<'_>,
        trace: TraceKey<'a>,
    ) {
        q.push("FROM span_words d WHERE ");
        trace.push(q, "d");
        q.push(" AND d.words @@ ")
            .bind(search.tsquery(false))
            .push("::tsquery");
    }
}
