//! The decoupled models: each request gets its responses through a response factory, then the
//! final flag alone. They stop early when the client cancels.
//!
//! - `text_stream`: inputs `PROMPT` (BYTES `[1, 1]`) and `COUNT` (INT32 `[1, 1]`), `COUNT`
//!   responses of `TEXT = "<PROMPT> <i>"`; `COUNT` -1 fails after one response and -2 fails on
//!   the first (the python `text_stream`'s contract).
//! - `repeat`: input `N` (INT32 `[1]`), `N` responses of `OUT = [i]` (the python `repeat_int32`'s).
//! - `token_stream`: a stand-in for a language model's generation loop, one token id a step:
//!   input `input_ids` (INT64 or INT32, any shape: the prompt's ids) and optionally
//!   `max_tokens` (INT32 `[1]`); it streams the prompt's ids back, one per response, as
//!   `output_ids` (INT64 `[1]`), at most `max_tokens` of them.

use std::borrow::Cow;
use std::time::Duration;

use crate::dtype::{DataType, bytes_elements, push_bytes_element};
use crate::error::BackendError;
use crate::models::{required, scalar_i32};
use crate::request::Input;
use crate::response::{Output, Response, ResponseFactory};

/// The most responses one request may ask for.
pub const MAX_RESPONSES: i32 = 100_000;

/// What a stream sends: the outputs of response `i`, or the failure it ends with.
pub enum Step<'a> {
    /// Send these outputs as one response.
    Send(Vec<Output<'a>>),
    /// End the stream with this error.
    Fail(BackendError),
}

/// A stream's plan for a request: how many steps, and what step `i` sends.
pub trait Plan {
    /// How many steps the stream takes.
    fn steps(&self) -> usize;
    /// What step `i` sends.
    fn step(&self, i: usize) -> Step<'_>;
}

/// `text_stream`'s plan.
pub struct TextPlan {
    prompt: String,
    count: i32,
}

impl TextPlan {
    /// Reads `PROMPT` and `COUNT`.
    pub fn new(inputs: &[Input<'_>]) -> Result<TextPlan, BackendError> {
        let prompt = required(inputs, "PROMPT")?;
        let elements = bytes_elements(&prompt.data)?;
        let [first] = elements.as_slice() else {
            return Err(BackendError::invalid(format!(
                "PROMPT must hold one string, it holds {}",
                elements.len()
            )));
        };
        let count = scalar_i32(required(inputs, "COUNT")?)?;
        if !(-2..=MAX_RESPONSES).contains(&count) {
            return Err(BackendError::invalid(format!(
                "COUNT must be -2 to {MAX_RESPONSES}, it is {count}"
            )));
        }
        Ok(TextPlan {
            prompt: String::from_utf8_lossy(first).into_owned(),
            count,
        })
    }

    fn text(&self, i: usize) -> Output<'static> {
        let mut data = Vec::new();
        push_bytes_element(&mut data, format!("{} {i}", self.prompt).as_bytes());
        Output {
            name: "TEXT".into(),
            dtype: DataType::Bytes,
            shape: vec![1, 1],
            data: Cow::Owned(data),
        }
    }
}

impl Plan for TextPlan {
    fn steps(&self) -> usize {
        match self.count {
            -2 => 1,
            -1 => 2,
            n => n as usize,
        }
    }

    fn step(&self, i: usize) -> Step<'_> {
        match (self.count, i) {
            (-2, _) => Step::Fail(BackendError::internal(
                "text_stream: failed at the first response",
            )),
            (-1, 1) => Step::Fail(BackendError::internal("text_stream: failed mid-stream")),
            _ => Step::Send(vec![self.text(i)]),
        }
    }
}

/// `repeat`'s plan.
pub struct RepeatPlan {
    n: i32,
}

impl RepeatPlan {
    /// Reads `N`.
    pub fn new(inputs: &[Input<'_>]) -> Result<RepeatPlan, BackendError> {
        let n = scalar_i32(required(inputs, "N")?)?;
        if !(0..=MAX_RESPONSES).contains(&n) {
            return Err(BackendError::invalid(format!(
                "N must be 0 to {MAX_RESPONSES}, it is {n}"
            )));
        }
        Ok(RepeatPlan { n })
    }
}

impl Plan for RepeatPlan {
    fn steps(&self) -> usize {
        self.n as usize
    }

    fn step(&self, i: usize) -> Step<'_> {
        Step::Send(vec![Output {
            name: "OUT".into(),
            dtype: DataType::I32,
            shape: vec![1],
            data: Cow::Owned((i as i32).to_le_bytes().to_vec()),
        }])
    }
}

/// `token_stream`'s plan.
pub struct TokenPlan {
    ids: Vec<i64>,
}

impl TokenPlan {
    /// Reads `input_ids` and `max_tokens`.
    pub fn new(inputs: &[Input<'_>]) -> Result<TokenPlan, BackendError> {
        let input = required(inputs, "input_ids")?;
        let mut ids: Vec<i64> = match input.dtype {
            DataType::I64 => input
                .data
                .as_chunks::<8>()
                .0
                .iter()
                .map(|v| i64::from_le_bytes(*v))
                .collect(),
            DataType::I32 => input
                .data
                .as_chunks::<4>()
                .0
                .iter()
                .map(|v| i64::from(i32::from_le_bytes(*v)))
                .collect(),
            other => {
                return Err(BackendError::invalid(format!(
                    "token_stream: input_ids is {other:?}, not INT64 or INT32"
                )));
            }
        };
        if let Some(max) = inputs.iter().find(|input| input.name == "max_tokens") {
            let max = scalar_i32(max)?;
            if !(0..=MAX_RESPONSES).contains(&max) {
                return Err(BackendError::invalid(format!(
                    "max_tokens must be 0 to {MAX_RESPONSES}, it is {max}"
                )));
            }
            ids.truncate(max as usize);
        }
        if ids.len() > MAX_RESPONSES as usize {
            return Err(BackendError::invalid(format!(
                "token_stream streams at most {MAX_RESPONSES} ids, and the prompt has {}",
                ids.len()
            )));
        }
        Ok(TokenPlan { ids })
    }
}

impl Plan for TokenPlan {
    fn steps(&self) -> usize {
        self.ids.len()
    }

    fn step(&self, i: usize) -> Step<'_> {
        Step::Send(vec![Output {
            name: "output_ids".into(),
            dtype: DataType::I64,
            shape: vec![1],
            data: Cow::Owned(self.ids[i].to_le_bytes().to_vec()),
        }])
    }
}

/// Runs `plan` through `factory`: one response per step, `delay` before each, stopping when
/// the client cancels; then the final flag. A failing step ends the stream with its error.
pub fn run(
    plan: &dyn Plan,
    factory: &ResponseFactory,
    delay: Duration,
) -> Result<(), BackendError> {
    for i in 0..plan.steps() {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if factory.is_cancelled() {
            break;
        }
        match plan.step(i) {
            Step::Send(outputs) => {
                let mut response = Response::from_factory(factory)?;
                for output in &outputs {
                    response.add_output(output)?;
                }
                response.send(false, None)?;
            }
            Step::Fail(error) => return Err(error),
        }
    }
    factory.send_final()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(prompt: &[u8], count: i32) -> Vec<Input<'static>> {
        let mut data = Vec::new();
        push_bytes_element(&mut data, prompt);
        vec![
            Input {
                name: "PROMPT".into(),
                dtype: DataType::Bytes,
                shape: vec![1, 1],
                data: Cow::Owned(data),
            },
            Input {
                name: "COUNT".into(),
                dtype: DataType::I32,
                shape: vec![1, 1],
                data: Cow::Owned(count.to_le_bytes().to_vec()),
            },
        ]
    }

    #[test]
    fn text_stream_counts_and_fails_where_asked() {
        let plan = TextPlan::new(&inputs(b"hi", 3)).unwrap();
        assert_eq!(plan.steps(), 3);
        let Step::Send(out) = plan.step(2) else {
            panic!("a failure")
        };
        assert_eq!(&*out[0].data, b"\x04\0\0\0hi 2");
        let plan = TextPlan::new(&inputs(b"hi", -1)).unwrap();
        assert_eq!(plan.steps(), 2);
        assert!(matches!(plan.step(0), Step::Send(_)));
        assert!(matches!(plan.step(1), Step::Fail(_)));
        let plan = TextPlan::new(&inputs(b"hi", -2)).unwrap();
        assert!(matches!(plan.step(0), Step::Fail(_)));
        assert!(TextPlan::new(&inputs(b"hi", -3)).is_err());
        assert!(TextPlan::new(&inputs(b"hi", MAX_RESPONSES + 1)).is_err());
    }

    #[test]
    fn repeat_sends_its_index() {
        let n = Input {
            name: "N".into(),
            dtype: DataType::I32,
            shape: vec![1],
            data: Cow::Owned(2i32.to_le_bytes().to_vec()),
        };
        let plan = RepeatPlan::new(&[n]).unwrap();
        assert_eq!(plan.steps(), 2);
        let Step::Send(out) = plan.step(1) else {
            panic!("a failure")
        };
        assert_eq!(&*out[0].data, &1i32.to_le_bytes());
    }
}
