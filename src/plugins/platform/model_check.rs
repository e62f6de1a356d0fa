//! A plugin's check of the models it is routed to: the optional `model-check` export
//! (`wit/plugin.wit`). Before a routed model is served (a single-model endpoint's start and each
//! plugin reload), every adapter that exports it is called once with the model's inputs and
//! outputs as the core's metadata states them; a refusal names the plugin, the model and the
//! plugin's reason, so that an image adapter configured for `INPUT0` does not meet a model whose
//! input is `input_1` at its first request. The call runs like any other: a fresh instance of
//! the plugin's initialised state, within its limits.

use std::sync::Arc;

use super::plugin::LoadedPlugin;
use crate::plugins::runtime::engine::Runtime;
use crate::plugins::runtime::store::CallStore;
use crate::plugins::wit::bindings::model_check::exports::trident::plugin::model_check::{
    ModelInfo, TensorSpec,
};
use crate::plugins::wit::bindings::types::Datatype;

/// The interface a checking plugin exports.
const INTERFACE: &str = "trident:plugin/model-check@0.1.0";

/// A Triton datatype name as the WIT enum; `None` for one it has not.
fn datatype(name: &str) -> Option<Datatype> {
    Some(match name {
        "BOOL" => Datatype::Boolean,
        "UINT8" => Datatype::Uint8,
        "UINT16" => Datatype::Uint16,
        "UINT32" => Datatype::Uint32,
        "UINT64" => Datatype::Uint64,
        "INT8" => Datatype::Int8,
        "INT16" => Datatype::Int16,
        "INT32" => Datatype::Int32,
        "INT64" => Datatype::Int64,
        "FP16" => Datatype::Fp16,
        "FP32" => Datatype::Fp32,
        "FP64" => Datatype::Fp64,
        "BYTES" => Datatype::Bytes,
        "BF16" => Datatype::Bf16,
        _ => return None,
    })
}

/// The model `name` as a check sees it, from its KServe v2 metadata (`inputs` and `outputs`,
/// each with `name`, `datatype` and `shape`); tensors of a type the interface has not are left
/// out.
pub fn model_info(name: &str, metadata: &serde_json::Value) -> ModelInfo {
    let tensors = |key: &str| -> Vec<TensorSpec> {
        metadata[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tensor| {
                Some(TensorSpec {
                    name: tensor["name"].as_str()?.to_owned(),
                    datatype: datatype(tensor["datatype"].as_str()?)?,
                    shape: tensor["shape"]
                        .as_array()?
                        .iter()
                        .map(|d| d.as_i64().unwrap_or(-1))
                        .collect(),
                })
            })
            .collect()
    };
    ModelInfo {
        name: name.to_owned(),
        inputs: tensors("inputs"),
        outputs: tensors("outputs"),
    }
}

impl LoadedPlugin {
    /// Whether the plugin exports `model-check`.
    pub fn checks_models(&self) -> bool {
        self.pre
            .component()
            .get_export_index(None, INTERFACE)
            .is_some()
    }
}

/// Calls `plugin`'s `check-model` with `model`, as a call of the plugin in `runtime`: its
/// refusal or failure, in words naming the plugin and the model.
pub async fn check(
    runtime: &Runtime,
    plugin: &Arc<LoadedPlugin>,
    model: ModelInfo,
) -> Result<(), String> {
    let (engine, called) = (runtime.engine.clone(), Arc::clone(plugin));
    let name = model.name.clone();
    let call = async move {
        let mut store = CallStore::new(&engine, &called.limits);
        let outcome = async {
            let instance = called.pre.instantiate_async(&mut store.store).await?;
            if called.init_each {
                crate::plugins::runtime::snapshot::check_config(&mut store.store, &instance)
                    .await?
                    .map_err(|message| {
                        wasmtime::format_err!("its check-config refused: {message}")
                    })?;
            }
            store.arm();
            let interface = instance.get_export_index(&mut store.store, None, INTERFACE);
            let func = interface.and_then(|interface| {
                instance.get_export_index(&mut store.store, Some(&interface), "check-model")
            });
            let func = func.ok_or_else(|| wasmtime::format_err!("exports no check-model"))?;
            let check = instance
                .get_typed_func::<(ModelInfo,), (Result<(), String>,)>(&mut store.store, func)?;
            Ok(check.call_async(&mut store.store, (model,)).await?.0)
        }
        .await;
        store.finish(outcome)
    };
    match runtime.run(&plugin.limits, call).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(reason)) => Err(format!(
            "plugin '{}' cannot serve model '{name}': {reason}",
            plugin.name
        )),
        Err(failure) => Err(format!("checking model '{name}': {failure}")),
    }
}
