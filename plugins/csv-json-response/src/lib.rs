//! Response adapter: answers CSV or JSON by the request's `Accept`. One output (config `output`,
//! default the first) is written row by row along its first dimension:
//! - `text/csv`: one line per row;
//! - `application/jsonlines`: one JSON array per line;
//! - anything else: `{"predictions": [[...], ...]}` as `application/json`.

wit_bindgen::generate!({ world: "response-adapter-plugin", path: "../../wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::response_adapter::{Guest, InferenceResult};
use trident::plugin::host::config;
use trident::plugin::types::{Datatype, Invocation, PluginError, Reply, Tensor};

struct Plugin;

/// The elements of a numeric tensor as text.
fn elements(tensor: &Tensor) -> Result<Vec<String>, PluginError> {
    macro_rules! each {
        ($t:ty) => {
            tensor
                .data
                .chunks_exact(size_of::<$t>())
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()).to_string())
                .collect()
        };
    }
    Ok(match tensor.datatype {
        Datatype::Boolean => tensor.data.iter().map(|&b| (b != 0).to_string()).collect(),
        Datatype::Uint8 => each!(u8),
        Datatype::Uint16 => each!(u16),
        Datatype::Uint32 => each!(u32),
        Datatype::Uint64 => each!(u64),
        Datatype::Int8 => each!(i8),
        Datatype::Int16 => each!(i16),
        Datatype::Int32 => each!(i32),
        Datatype::Int64 => each!(i64),
        Datatype::Fp32 => each!(f32),
        Datatype::Fp64 => each!(f64),
        other => {
            return Err(PluginError::Internal(format!(
                "output '{}' is {other:?}, which this adapter does not write",
                tensor.name
            )));
        }
    })
}

impl Guest for Plugin {
    fn adapt_response(
        invocation: Invocation,
        inference: InferenceResult,
    ) -> Result<Reply, PluginError> {
        let wanted = config("output");
        let tensor = match &wanted {
            Some(name) => inference.outputs.iter().find(|t| &t.name == name),
            None => inference.outputs.first(),
        }
        .ok_or_else(|| {
            PluginError::Internal(format!(
                "the model returned no output {}",
                wanted.unwrap_or_default()
            ))
        })?;
        let values = elements(tensor)?;
        let rows = usize::try_from(tensor.shape.first().copied().unwrap_or(1))
            .unwrap_or(1)
            .max(1);
        let per_row = values.len() / rows;
        let lines: Vec<&[String]> = if per_row == 0 {
            Vec::new()
        } else {
            values.chunks(per_row).collect()
        };
        let accept = invocation.accept.as_deref().unwrap_or("application/json");
        let (content_type, body) = if accept.starts_with("text/csv") {
            let text: String = lines.iter().map(|row| row.join(",") + "\n").collect();
            ("text/csv", text)
        } else if accept.starts_with("application/jsonlines") {
            let text: String = lines
                .iter()
                .map(|row| format!("[{}]\n", row.join(",")))
                .collect();
            ("application/jsonlines", text)
        } else {
            let rows: Vec<String> = lines
                .iter()
                .map(|row| format!("[{}]", row.join(",")))
                .collect();
            (
                "application/json",
                format!("{{\"predictions\":[{}]}}", rows.join(",")),
            )
        };
        Ok(Reply {
            status: 200,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into_bytes(),
        })
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        // Every key this plugin reads is read here: trident refuses a key check-config did
        // not read, so a misspelled one fails the load instead of leaving its default serving.
        let _ = config("output");
        Ok(())
    }
}

export!(Plugin);
