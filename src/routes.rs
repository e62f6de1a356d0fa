//! Every route trident answers, as data: for each path, the methods it takes and, per method,
//! the restricted-API category that guards it, whether it reads a request body and its name in
//! metrics. The router (`http`) dispatches by this table, a 405's `Allow` header is read off
//! it, and the configuration asks it which paths are taken (`config`: the metrics path may not
//! shadow a route).
//!
//! The metrics path is configurable, so it is not in the table: the router answers it first.

use http::Method;

use Category::{Health, Inference, ModelRepository};

/// The route groups a restricted API can cover (Triton's `--http-restricted-api` categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// `/models` load, list, get and unload, and `/plugins/reload`.
    ModelRepository,
    /// `/invocations`, `/models/{name}/invoke`, the bidirectional stream and OpenAI's chat
    /// completions.
    Inference,
    /// `/ping` and the metrics path.
    Health,
}

/// The routes trident answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /ping`: SageMaker's health check.
    Ping,
    /// `POST /invocations`: an inference, generate or generate stream on the default model.
    Invocations,
    /// `GET /execution-parameters`: the batch transform settings.
    ExecutionParameters,
    /// `/models`: `GET` lists a multi-model endpoint's loaded models, `POST` loads one.
    Models,
    /// `/models/{name}`: `GET` describes a loaded model, `DELETE` unloads it.
    Model(&'a str),
    /// `POST /models/{name}/invoke`: an inference on a model loaded through `/models`.
    Invoke(&'a str),
    /// `POST /plugins/reload`: reload the plugin manifest (restricted like the model repository).
    PluginReload,
    /// `GET /invocations-bidirectional-stream`: a WebSocket of invocations.
    BidiStream,
    /// `POST /v1/chat/completions` or `POST /openai/v1/chat/completions`: OpenAI's chat
    /// completions, through the manifest's `openai_chat` plugin, on the default model.
    OpenAiChat(&'a str),
}

/// The paths of OpenAI's chat completions (SageMaker's OpenAI-compatible route, and OpenAI's
/// own, for clients given trident's address as their `base_url`).
pub const OPENAI_CHAT_PATHS: [&str; 2] = ["/v1/chat/completions", "/openai/v1/chat/completions"];

/// The bidirectional stream's path.
pub const BIDI_STREAM_PATH: &str = "/invocations-bidirectional-stream";

/// What one method of one route does, and the rules it is served by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The method.
    pub method: Method,
    /// The handler that answers it.
    pub handler: Handler,
    /// The restricted-API category a request must pass first; `None`: never restricted.
    pub category: Option<Category>,
    /// Whether the request's body is read (within the body limit and time-out) before the
    /// handler runs.
    pub reads_body: bool,
    /// The route's name in metrics.
    pub label: &'static str,
    /// What a stateful session's header (`X-Amzn-SageMaker-Session-Id`) means here.
    pub sessions: SessionHeader,
}

/// What an endpoint does with a stateful session's header (when sessions are on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionHeader {
    /// The request runs in its session (the inference routes).
    Serves,
    /// The request is refused (400): the route changes something, and a session cannot be
    /// part of it.
    Refuses,
    /// The header means nothing here and is ignored (reads such as `/ping`).
    Ignores,
}

/// What answers an endpoint; one per row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// `http::ping`.
    Ping,
    /// `http::invocations::invoke_default`.
    Invoke,
    /// `http::bidi_stream::upgrade`.
    BidiStream,
    /// The batch transform settings.
    ExecutionParameters,
    /// `http::models::list`.
    ModelList,
    /// `http::models::load`.
    ModelLoad,
    /// `http::models::get`.
    ModelGet,
    /// `http::models::unload`.
    ModelUnload,
    /// `http::models::invoke`.
    ModelInvoke,
    /// The plugin manifest's reload.
    PluginReload,
    /// `http::invocations::openai_chat`.
    OpenAiChat,
}

const fn endpoint(
    method: Method,
    handler: Handler,
    category: Option<Category>,
    reads_body: bool,
    label: &'static str,
) -> Endpoint {
    Endpoint {
        method,
        handler,
        category,
        reads_body,
        label,
        sessions: SessionHeader::Ignores,
    }
}

impl Endpoint {
    const fn sessions(mut self, sessions: SessionHeader) -> Endpoint {
        self.sessions = sessions;
        self
    }
}

/// The table: each route's endpoints (the first names the route in metrics when the method is
/// wrong) and the `Allow` header of a 405, which lists exactly their methods.
const PING: (&[Endpoint], &str) = (
    &[endpoint(
        Method::GET,
        Handler::Ping,
        Some(Health),
        false,
        "ping",
    )],
    "GET",
);
const INVOCATIONS: (&[Endpoint], &str) = (
    &[endpoint(
        Method::POST,
        Handler::Invoke,
        Some(Inference),
        true,
        "invocations",
    )
    .sessions(SessionHeader::Serves)],
    "POST",
);
const BIDI_STREAM: (&[Endpoint], &str) = (
    &[endpoint(
        Method::GET,
        Handler::BidiStream,
        Some(Inference),
        false,
        "bidirectional_stream",
    )
    .sessions(SessionHeader::Refuses)],
    "GET",
);
/// Batch transform asks for it before any inference; like Triton's own SageMaker routes outside
/// the three categories, it is never restricted.
const EXECUTION_PARAMETERS: (&[Endpoint], &str) = (
    &[endpoint(
        Method::GET,
        Handler::ExecutionParameters,
        None,
        false,
        "execution_parameters",
    )],
    "GET",
);
const MODELS: (&[Endpoint], &str) = (
    &[
        endpoint(
            Method::GET,
            Handler::ModelList,
            Some(ModelRepository),
            false,
            "model_list",
        ),
        endpoint(
            Method::POST,
            Handler::ModelLoad,
            Some(ModelRepository),
            true,
            "model_load",
        )
        .sessions(SessionHeader::Refuses),
    ],
    "GET, POST",
);
const MODEL: (&[Endpoint], &str) = (
    &[
        endpoint(
            Method::GET,
            Handler::ModelGet,
            Some(ModelRepository),
            false,
            "model_get",
        ),
        endpoint(
            Method::DELETE,
            Handler::ModelUnload,
            Some(ModelRepository),
            false,
            "model_unload",
        )
        .sessions(SessionHeader::Refuses),
    ],
    "GET, DELETE",
);
const INVOKE: (&[Endpoint], &str) = (
    &[endpoint(
        Method::POST,
        Handler::ModelInvoke,
        Some(Inference),
        true,
        "model_invoke",
    )
    .sessions(SessionHeader::Serves)],
    "POST",
);
const PLUGIN_RELOAD: (&[Endpoint], &str) = (
    &[endpoint(
        Method::POST,
        Handler::PluginReload,
        Some(ModelRepository),
        false,
        "plugin_reload",
    )
    .sessions(SessionHeader::Refuses)],
    "POST",
);

const OPENAI_CHAT: (&[Endpoint], &str) = (
    &[endpoint(
        Method::POST,
        Handler::OpenAiChat,
        Some(Inference),
        true,
        "openai_chat",
    )
    .sessions(SessionHeader::Refuses)],
    "POST",
);

impl<'a> Route<'a> {
    /// The route for a path (query excluded), or `None` (404).
    pub fn parse(path: &'a str) -> Option<Route<'a>> {
        match path {
            "/ping" => Some(Route::Ping),
            "/invocations" => Some(Route::Invocations),
            BIDI_STREAM_PATH => Some(Route::BidiStream),
            "/execution-parameters" => Some(Route::ExecutionParameters),
            "/models" | "/models/" => Some(Route::Models),
            "/plugins/reload" => Some(Route::PluginReload),
            _ if OPENAI_CHAT_PATHS.contains(&path) => Some(Route::OpenAiChat(path)),
            _ => {
                let rest = path.strip_prefix("/models/")?;
                match rest.split_once('/') {
                    None if !rest.is_empty() => Some(Route::Model(rest)),
                    Some((name, "invoke")) if !name.is_empty() => Some(Route::Invoke(name)),
                    _ => None,
                }
            }
        }
    }

    fn row(self) -> (&'static [Endpoint], &'static str) {
        match self {
            Route::Ping => PING,
            Route::Invocations => INVOCATIONS,
            Route::BidiStream => BIDI_STREAM,
            Route::ExecutionParameters => EXECUTION_PARAMETERS,
            Route::Models => MODELS,
            Route::Model(_) => MODEL,
            Route::Invoke(_) => INVOKE,
            Route::PluginReload => PLUGIN_RELOAD,
            Route::OpenAiChat(_) => OPENAI_CHAT,
        }
    }

    /// The endpoint `method` reaches on this route, or `None` (405).
    pub fn endpoint(self, method: &Method) -> Option<&'static Endpoint> {
        self.row().0.iter().find(|e| e.method == *method)
    }

    /// The methods the route answers (the `Allow` header of a 405).
    pub fn allow(self) -> &'static str {
        self.row().1
    }

    /// The route's name in metrics, for a request with `method` (a method the route does not
    /// take counts under its first endpoint's name).
    pub fn label(self, method: &Method) -> &'static str {
        self.endpoint(method).unwrap_or(&self.row().0[0]).label
    }
}

/// Whether `path` belongs to trident's own routes: every route above and the whole `/models/`
/// namespace (where a model's name may be anything). Configurable paths may not take these.
pub fn is_reserved(path: &str) -> bool {
    Route::parse(path).is_some() || path.starts_with("/models/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_to_routes() {
        assert_eq!(Route::parse("/ping"), Some(Route::Ping));
        assert_eq!(Route::parse("/models/"), Some(Route::Models));
        assert_eq!(Route::parse("/models/abc"), Some(Route::Model("abc")));
        assert_eq!(
            Route::parse("/models/abc/invoke"),
            Some(Route::Invoke("abc"))
        );
        for unknown in [
            "/",
            "/ping/",
            "/invocations/",
            "/modelsfoo",
            "/models/a/b",
            "/models//invoke",
            "/models/a/invoke/x",
        ] {
            assert_eq!(Route::parse(unknown), None, "{unknown}");
        }
        assert!(is_reserved("/models/a/b"));
        assert!(is_reserved(BIDI_STREAM_PATH));
        for path in OPENAI_CHAT_PATHS {
            assert_eq!(Route::parse(path), Some(Route::OpenAiChat(path)));
        }
        assert_eq!(Route::parse("/v1/chat/completions/"), None);
        assert!(!is_reserved("/metrics"));
    }

    /// Each row's `Allow` lists exactly its endpoints' methods, no method appears twice in a
    /// row, and every handler answers exactly one endpoint.
    #[test]
    fn the_table_is_consistent() {
        let routes = [
            Route::Ping,
            Route::Invocations,
            Route::BidiStream,
            Route::ExecutionParameters,
            Route::Models,
            Route::Model("m"),
            Route::Invoke("m"),
            Route::PluginReload,
            Route::OpenAiChat("/v1/chat/completions"),
        ];
        let mut handlers = Vec::new();
        for route in routes {
            let (endpoints, allow) = route.row();
            let methods: Vec<&str> = endpoints.iter().map(|e| e.method.as_str()).collect();
            assert_eq!(methods.join(", "), allow, "{route:?}");
            for e in endpoints {
                assert_eq!(route.endpoint(&e.method), Some(e));
                handlers.push(e.handler);
            }
        }
        let count = handlers.len();
        handlers.sort_by_key(|h| format!("{h:?}"));
        handlers.dedup();
        assert_eq!(handlers.len(), count, "a handler serves two endpoints");
        assert_eq!(Route::Models.label(&Method::POST), "model_load");
        assert_eq!(Route::Models.label(&Method::PUT), "model_list");
        assert_eq!(Route::Model("m").label(&Method::DELETE), "model_unload");
        assert_eq!(Route::Model("m").endpoint(&Method::POST), None);
        // Sessions are served where inferences run, and refused where a request changes
        // something or opens a stream of its own; other reads ignore the header.
        for route in routes {
            for e in route.row().0 {
                let expected = match e.handler {
                    Handler::Invoke | Handler::ModelInvoke => SessionHeader::Serves,
                    Handler::ModelLoad
                    | Handler::ModelUnload
                    | Handler::PluginReload
                    | Handler::BidiStream
                    | Handler::OpenAiChat => SessionHeader::Refuses,
                    Handler::Ping
                    | Handler::ExecutionParameters
                    | Handler::ModelList
                    | Handler::ModelGet => SessionHeader::Ignores,
                };
                assert_eq!(e.sessions, expected, "{route:?} {}", e.method);
            }
        }
    }
}
