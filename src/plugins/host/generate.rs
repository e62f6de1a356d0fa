//! Calls of version 0.2.0's generate hooks: the generate request adapter, the response adapter
//! of a finished generate answer, and the stream adapter (once per event, once at the end).
//! Each call takes a fresh instance (a stream's later calls, the one the stream keeps) and runs
//! under the plugin's limits, as every hook does.

use std::sync::Arc;

use super::{LoadedPlugin, PluginHost};
use crate::plugins::wit::bindings::generate_request::exports::trident::plugin::generate_request_adapter::GenerateInputs as WitGenerateInputs;
use crate::plugins::wit::bindings::stream::exports::trident::plugin::stream_adapter;
use crate::plugins::runtime::boundary::{
    AdaptedGenerate, GenerateInputs, HookResult, PluginInvocation, PluginReply, StreamPosition,
    converted,
};
use crate::plugins::wit::convert;
use crate::plugins::runtime::kept_instance::KeptInstance;
use crate::plugins::runtime::stream_state::StreamState;

impl PluginHost {
    /// Calls a generate request adapter.
    pub async fn adapt_generate_request(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
    ) -> HookResult<AdaptedGenerate> {
        let (session, invocation) = (invocation.session.clone(), Arc::clone(&invocation.wit));
        let adapted = self
            .call(
                plugin,
                super::call::Kept::session(session),
                crate::plugins::platform::accounting::Hook::GenerateRequest,
                |hooks| hooks.generate_request.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_generate_request_adapter()
                            .call_adapt_generate_request(store, &invocation)
                            .await
                    })
                },
            )
            .await;
        converted(adapted, |adapted| AdaptedGenerate {
            inputs: match adapted.inputs {
                WitGenerateInputs::Json(json) => GenerateInputs::Json(json),
                WitGenerateInputs::Tensors(tensors) => GenerateInputs::Tensors(
                    tensors.into_iter().map(convert::input_from_wit).collect(),
                ),
            },
            stream: adapted.stream,
        })
    }

    /// Calls the response adapter of a finished generate answer with the model's responses,
    /// each as its flat JSON object.
    pub async fn adapt_generate_response(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
        responses: Vec<Vec<u8>>,
    ) -> HookResult<PluginReply> {
        let (session, invocation) = (invocation.session.clone(), Arc::clone(&invocation.wit));
        let reply = self
            .call(
                plugin,
                super::call::Kept::session(session),
                crate::plugins::platform::accounting::Hook::GenerateResponse,
                |hooks| hooks.generate_response.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_generate_response_adapter()
                            .call_adapt_generate_response(store, &invocation, &responses)
                            .await
                    })
                },
            )
            .await;
        converted(reply, PluginReply::from)
    }

    /// Calls the stream adapter for one event: the payloads to send in its place, or, with
    /// `event` `None`, the payloads that end the stream; `state` is the stream's
    /// (`trident:stream-state/state`) and `instance` where the instance its calls share is
    /// kept ([`KeptInstance`]; `None`: a fresh instance each call), the same for every call of
    /// one stream.
    pub async fn adapt_stream(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
        position: &StreamPosition,
        event: Option<Vec<u8>>,
        state: &Arc<StreamState>,
        instance: Option<&Arc<KeptInstance>>,
    ) -> HookResult<Vec<String>> {
        let (session, invocation) = (invocation.session.clone(), Arc::clone(&invocation.wit));
        let position = stream_adapter::StreamPosition {
            stream_id: position.stream_id.clone(),
            created: position.created,
            index: position.index,
        };
        let payloads = self
            .call(
                plugin,
                super::call::Kept {
                    session,
                    stream: Some(Arc::clone(state)),
                    instance: instance.map(Arc::clone),
                    max_batch: None,
                    models: None,
                },
                crate::plugins::platform::accounting::Hook::Stream,
                |hooks| hooks.stream.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        let adapter = instance.trident_plugin_stream_adapter();
                        match &event {
                            Some(event) => {
                                adapter
                                    .call_adapt_event(store, &invocation, &position, event)
                                    .await
                            }
                            None => adapter.call_end_stream(store, &invocation, &position).await,
                        }
                    })
                },
            )
            .await;
        converted(payloads, |payloads| payloads)
    }
}
