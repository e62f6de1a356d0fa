//! Which codec reads a request and which writes its answer, chosen once per request: KServe v2
//! (JSON or the binary extension) or a plugin of the model's selection.

use std::sync::Arc;

use crate::invocation::Invocation;
use crate::plugins::LoadedPlugin;
use crate::plugins::Selection;
use crate::plugins::platform::shadow::Shadow;

/// The codecs of one request.
#[derive(Clone, Default)]
pub struct Codecs {
    /// The request adapter that decodes the body, or `None` for KServe v2.
    pub request: Option<Arc<LoadedPlugin>>,
    /// The response adapter that writes the answer, or `None` for KServe v2.
    pub response: Option<Arc<LoadedPlugin>>,
    /// The pipeline that answers the request whole (then there is no adapter), or `None`.
    pub pipeline: Option<Arc<LoadedPlugin>>,
    /// The A/B variant that chose them, when the model has variants.
    pub variant: Option<String>,
    /// The model's shadow, when this request is in its sample.
    pub shadow: Option<Arc<Shadow>>,
}

impl Codecs {
    /// The codecs `selection` offers for `invocation`: its request adapter when it takes the
    /// body's content type; its response adapter for requests that adapter took when it
    /// writes what the client accepts, and for plain v2 requests only when the client's
    /// `Accept` names it (a plain v2 request keeps its v2 answer). A KServe v2 inference
    /// request in JSON is a plain v2 request even where the adapter takes `application/json`
    /// ([`crate::protocol::v2_sniff`]): v2 clients reach the model behind an adapter of images
    /// or texts in JSON. An adapter that names no `content_types` takes every body, v2's too.
    ///
    /// A pipeline takes the requests whose content type it serves, as a request adapter does
    /// (a plain v2 request reaches the model itself).
    pub fn choose(selection: Selection, invocation: &Invocation, body: &[u8]) -> Codecs {
        let content_type = invocation.content_type.as_deref();
        let takes = |p: &Arc<LoadedPlugin>| {
            p.accepts_content_type(content_type)
                && !(p.names_content_types()
                    && is_json(content_type)
                    && crate::protocol::v2_sniff::is_v2_inference(body))
        };
        if let Some(pipeline) = selection.pipeline.filter(takes) {
            return Codecs {
                pipeline: Some(pipeline),
                variant: selection.variant,
                ..Codecs::default()
            };
        }
        let request = selection
            .request
            .filter(|p| p.serves_content_type(content_type) && takes(p));
        let accept = invocation.accept.as_deref();
        let response = selection.response.filter(|p| {
            if request.is_some() {
                p.serves_accept(accept)
            } else {
                p.claims_accept(accept)
            }
        });
        Codecs {
            request,
            response,
            pipeline: None,
            variant: selection.variant,
            shadow: selection.shadow,
        }
    }
}

/// Whether a request's Content-Type says JSON as v2 clients send it: `application/json` (any
/// parameters, any case), or none.
fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_none_or(|value| {
        value
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    })
}
