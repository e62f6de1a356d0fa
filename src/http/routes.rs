//! The router: one table of every endpoint trident answers, each row a path pattern, a method,
//! its handler and the rules the router carries out before the handler runs (the restricted-API
//! category, whether the body is read, the metrics label, which model the request is about, and
//! what a stateful session's header means). A new route is one row here and its handler.
//!
//! Patterns are literal paths; `|` separates paths one row answers alike, and a `{name}`
//! segment takes one non-empty segment (a model's name). A path is matched once per request;
//! a path some row matches with another method is 405, its `Allow` read off the rows. The
//! metrics path is configurable, so its row is matched first, against the configured path.

use std::future::Future;
use std::marker::PhantomData;

use http::Method;

pub use super::call::{Answer, Call, Reply};
use super::{bidi_stream, execution_parameters, invocations, metrics, models, ping, plugin_reload};
use crate::config::restrictions::Category::{self, Health, Inference, ModelRepository};
use crate::engine::Engine;

/// What answers an endpoint: a request that passed its row's rules.
pub type Handler<E> = for<'a> fn(Call<'a, E>) -> Reply<'a>;

/// Which model a request is about: its label in metrics and, on rows that serve sessions, the
/// model its session runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelOf {
    /// None in particular.
    None,
    /// The endpoint's default model (`/invocations`).
    Default,
    /// The model the url names (labelled only once the endpoint has it).
    Named,
    /// The model the url names, which must be loaded (404) and be the one
    /// `X-Amzn-SageMaker-Target-Model` names when it names one (400).
    Loaded,
}

/// What an endpoint does with a stateful session's header (when sessions are on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRule {
    /// The request runs in its session; `NEW_SESSION` and `CLOSE` are answered by the router.
    Serves,
    /// The request is refused (400): the route changes something, or streams on its own, and
    /// a session cannot be part of it.
    Refuses,
    /// The header means nothing here and is ignored (reads such as `/ping`).
    Ignores,
}

/// One row of the table.
pub struct Endpoint<E> {
    /// The path pattern.
    pub path: &'static str,
    /// The method.
    pub method: Method,
    /// What answers it.
    pub handler: Handler<E>,
    /// The restricted-API category a request must pass first; `None`: never restricted.
    pub category: Option<Category>,
    /// Whether the body is read (within the body limit and time-out) before the handler runs.
    pub reads_body: bool,
    /// The endpoint's name in metrics.
    pub label: &'static str,
    /// Which model the request is about.
    pub model: ModelOf,
    /// What a stateful session's header means here.
    pub sessions: SessionRule,
}

/// Reads the body before the handler runs.
const BODY: bool = true;
/// Leaves the body unread.
const NO_BODY: bool = false;

const fn row<E>(
    path: &'static str,
    method: Method,
    handler: Handler<E>,
    category: Option<Category>,
    reads_body: bool,
    label: &'static str,
) -> Endpoint<E> {
    Endpoint {
        path,
        method,
        handler,
        category,
        reads_body,
        label,
        model: ModelOf::None,
        sessions: SessionRule::Ignores,
    }
}

impl<E> Endpoint<E> {
    const fn about(mut self, model: ModelOf) -> Self {
        self.model = model;
        self
    }

    const fn sessions(mut self, rule: SessionRule) -> Self {
        self.sessions = rule;
        self
    }
}

/// A handler's answer that is ready now.
fn ready<'a>(answer: Answer) -> Reply<'a> {
    Box::pin(std::future::ready(answer))
}

/// A handler's answer to come.
fn later<'a>(answer: impl Future<Output = Answer> + Send + 'a) -> Reply<'a> {
    Box::pin(answer)
}

/// The table's home; generic over the engine its handlers run on.
pub struct Router<E>(PhantomData<E>);

impl<E: Engine> Router<E> {
    /// Every endpoint, metrics aside.
    #[rustfmt::skip]
    const ROWS: &'static [Endpoint<E>] = &[
        row("/ping", Method::GET, |c| ready(ping::ping(c.state)), Some(Health), NO_BODY, "ping"),
        row("/invocations", Method::POST, |c| later(invocations::invoke_default(c)), Some(Inference), BODY, "invocations")
            .about(ModelOf::Default)
            .sessions(SessionRule::Serves),
        row(bidi_stream::PATH, Method::GET, |mut c| ready(bidi_stream::upgrade(c.state, &mut c.parts)), Some(Inference), NO_BODY, "bidirectional_stream")
            .sessions(SessionRule::Refuses),
        // Batch transform asks for it before any inference; like Triton's own SageMaker routes
        // outside the three categories, it is never restricted.
        row("/execution-parameters", Method::GET, |c| ready(Ok(execution_parameters::answer(c.state))), None, NO_BODY, "execution_parameters"),
        row("/models|/models/", Method::GET, |c| ready(models::list(c.state, c.parts.uri.query())), Some(ModelRepository), NO_BODY, "model_list"),
        row("/models|/models/", Method::POST, |c| later(models::load(c)), Some(ModelRepository), BODY, "model_load")
            .sessions(SessionRule::Refuses),
        row("/models/{name}", Method::GET, |c| ready(models::get(c.state, &c.name)), Some(ModelRepository), NO_BODY, "model_get")
            .about(ModelOf::Named),
        row("/models/{name}", Method::DELETE, |c| later(models::unload(c)), Some(ModelRepository), NO_BODY, "model_unload")
            .about(ModelOf::Named)
            .sessions(SessionRule::Refuses),
        row("/models/{name}/invoke", Method::POST, |c| later(models::invoke(c)), Some(Inference), BODY, "model_invoke")
            .about(ModelOf::Loaded)
            .sessions(SessionRule::Serves),
        row("/plugins/reload", Method::POST, |c| later(plugin_reload::reload(c.state)), Some(ModelRepository), NO_BODY, "plugin_reload")
            .sessions(SessionRule::Refuses),
        // SageMaker's OpenAI-compatible route, and OpenAI's own for clients given trident's
        // address as their `base_url`.
        row("/v1/chat/completions|/openai/v1/chat/completions", Method::POST, |c| later(invocations::openai_chat(c)), Some(Inference), BODY, "openai_chat")
            .sessions(SessionRule::Refuses),
    ];

    /// What SageMaker's observability scrapes on the main port, restricted like `/ping`; its
    /// path is the configured one.
    const METRICS: &'static Endpoint<E> = &row(
        "",
        Method::GET,
        |c| ready(Ok(metrics::text(c.state))),
        Some(Health),
        NO_BODY,
        "metrics",
    );

    /// The row answering `method` on `path`, with the url's `{name}` (empty when none), given
    /// the configured metrics path.
    pub fn find(metrics_path: &str, method: &Method, path: &str) -> Found<E> {
        if path == metrics_path {
            return match *method == Method::GET {
                true => Found::Endpoint(Self::METRICS, String::new()),
                false => Found::WrongMethod(Self::METRICS, "GET".into()),
            };
        }
        let mut first = None;
        for endpoint in Self::ROWS {
            if let Some(name) = capture(endpoint.path, path) {
                if endpoint.method == *method {
                    return Found::Endpoint(endpoint, name.to_owned());
                }
                first.get_or_insert(endpoint);
            }
        }
        match first {
            Some(endpoint) => Found::WrongMethod(endpoint, Self::allow(path)),
            None => Found::Nothing,
        }
    }

    /// The methods some row answers on `path`, as a 405's `Allow` header lists them.
    fn allow(path: &str) -> String {
        let methods: Vec<&str> = Self::ROWS
            .iter()
            .filter(|e| capture(e.path, path).is_some())
            .map(|e| e.method.as_str())
            .collect();
        methods.join(", ")
    }

    /// Whether `path` belongs to trident's own routes: every row's and the whole `/models/`
    /// namespace (where a model's name may be anything). The configurable paths may not take
    /// these (the metrics path is checked by `cli` against this, with any engine type: the
    /// paths do not depend on it).
    pub fn is_reserved(path: &str) -> bool {
        path.starts_with("/models/") || Self::ROWS.iter().any(|e| capture(e.path, path).is_some())
    }
}

/// What the table holds for a request.
pub enum Found<E: 'static> {
    /// The endpoint, and the url's `{name}` (empty when the pattern has none).
    Endpoint(&'static Endpoint<E>, String),
    /// The path is served, not with this method: the path's first row (its metrics label) and
    /// the `Allow` header.
    WrongMethod(&'static Endpoint<E>, String),
    /// No row has the path (404).
    Nothing,
}

/// The `{name}` a pattern takes from `path` (empty when it has none), or `None` when the
/// pattern does not match.
fn capture<'p>(pattern: &str, path: &'p str) -> Option<&'p str> {
    pattern
        .split('|')
        .find_map(|pattern| match pattern.split_once("{name}") {
            None => (pattern == path).then_some(""),
            Some((before, after)) => {
                let name = path.strip_prefix(before)?.strip_suffix(after)?;
                (!name.is_empty() && !name.contains('/')).then_some(name)
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fake::FakeEngine;

    type Table = Router<FakeEngine>;

    fn route(method: Method, path: &str) -> Option<(&'static str, String)> {
        match Table::find("/metrics", &method, path) {
            Found::Endpoint(e, name) => Some((e.label, name)),
            _ => None,
        }
    }

    #[test]
    fn paths_find_their_rows() {
        assert_eq!(route(Method::GET, "/ping"), Some(("ping", "".into())));
        assert_eq!(
            route(Method::GET, "/models/"),
            Some(("model_list", "".into()))
        );
        assert_eq!(
            route(Method::GET, "/models/abc"),
            Some(("model_get", "abc".into()))
        );
        assert_eq!(
            route(Method::POST, "/models/abc/invoke"),
            Some(("model_invoke", "abc".into()))
        );
        assert_eq!(route(Method::GET, "/metrics"), Some(("metrics", "".into())));
        for path in ["/v1/chat/completions", "/openai/v1/chat/completions"] {
            assert_eq!(route(Method::POST, path), Some(("openai_chat", "".into())));
        }
        for unknown in [
            "/",
            "",
            "/ping/",
            "/invocations/",
            "/modelsfoo",
            "/models/a/b",
            "/models//invoke",
            "/models/a/invoke/x",
            "/v1/chat/completions/",
        ] {
            assert!(
                matches!(
                    Table::find("/metrics", &Method::GET, unknown),
                    Found::Nothing
                ),
                "{unknown}"
            );
        }
        assert!(Table::is_reserved("/models/a/b"));
        assert!(Table::is_reserved(bidi_stream::PATH));
        assert!(!Table::is_reserved("/metrics"));
    }

    #[test]
    fn a_wrong_method_is_told_the_path_s_methods() {
        let allow = |method: Method, path: &str| match Table::find("/m", &method, path) {
            Found::WrongMethod(first, allow) => Some((first.label, allow)),
            _ => None,
        };
        assert_eq!(
            allow(Method::PUT, "/models"),
            Some(("model_list", "GET, POST".into()))
        );
        assert_eq!(
            allow(Method::POST, "/models/m"),
            Some(("model_get", "GET, DELETE".into()))
        );
        assert_eq!(allow(Method::POST, "/m"), Some(("metrics", "GET".into())));
        assert_eq!(
            allow(Method::GET, "/invocations"),
            Some(("invocations", "POST".into()))
        );
    }

    /// A metrics path one of the routes takes stops the start, naming the setting.
    #[test]
    fn the_metrics_path_may_not_take_a_route() {
        use crate::config::{Config, Mode};
        for path in [
            "/ping",
            "/invocations",
            "/models",
            "/models/x",
            "/plugins/reload",
        ] {
            let mut config = Config::new(Mode::MultiModel {
                repository: "/r".into(),
                models_root: "/m".into(),
            });
            config.http.metrics_path = path.into();
            let error = config.check_routes(Table::is_reserved).unwrap_err().0;
            assert!(error.contains("TRIDENT_METRICS_PATH"), "{path}: {error}");
        }
        let config = Config::new(Mode::MultiModel {
            repository: "/r".into(),
            models_root: "/m".into(),
        });
        assert_eq!(config.check_routes(Table::is_reserved), Ok(()));
    }

    /// No method appears twice on a path; every label is one endpoint's; a row that serves
    /// sessions says which model they run on.
    #[test]
    fn the_table_is_consistent() {
        let mut labels: Vec<&str> = Table::ROWS.iter().map(|e| e.label).collect();
        labels.push(Table::METRICS.label);
        let count = labels.len();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), count, "a label names two endpoints");
        for (i, a) in Table::ROWS.iter().enumerate() {
            for b in &Table::ROWS[i + 1..] {
                assert!(
                    a.path != b.path || a.method != b.method,
                    "{} {}",
                    a.method,
                    a.path
                );
            }
            if a.sessions == SessionRule::Serves {
                assert_ne!(a.model, ModelOf::None, "{}", a.path);
            }
            assert_eq!(
                a.path.contains("{name}"),
                matches!(a.model, ModelOf::Named | ModelOf::Loaded)
            );
        }
    }
}
