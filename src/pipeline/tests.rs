//! The pipeline over the scripted engine ([`crate::engine::fake`]): each path and each failure,
//! in milliseconds. The same paths run against the real core in `tests/http_contract/`.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Value, json};

use super::{Answer, DECOUPLED_REFUSED, Failure, Inferred, Pipeline, Request, StreamEvent};
use crate::engine::fake::{FakeEngine, FakeModel};
use crate::engine::{DataType, EngineError, ErrorCode, InferRequest, InferResponse, OutputTensor};
use crate::invocation::Invocation;
use crate::metrics::Metrics;

/// A response of `model` with the outputs `outputs`.
fn response(model: &str, outputs: Vec<OutputTensor>) -> InferResponse {
    InferResponse {
        model_name: model.to_owned(),
        model_version: 1,
        id: None,
        parameters: Vec::new(),
        outputs,
    }
}

/// Answers every input `X` with an output `X_OUT` holding the same tensor.
fn echo(request: &InferRequest) -> Vec<Result<InferResponse, EngineError>> {
    let outputs = request
        .inputs
        .iter()
        .map(|input| OutputTensor {
            name: format!("{}_OUT", input.name),
            datatype: input.datatype,
            shape: input.shape.clone(),
            data: input.data.clone(),
        })
        .collect();
    vec![Ok(response(&request.model_name, outputs))]
}

/// A `TEXT` output of one string (BYTES: a 4-byte little-endian length, then the bytes).
fn text(model: &str, text: &str) -> InferResponse {
    let mut data = (text.len() as u32).to_le_bytes().to_vec();
    data.extend_from_slice(text.as_bytes());
    let output = OutputTensor {
        name: "TEXT".into(),
        datatype: DataType::Bytes,
        shape: vec![1],
        data: Bytes::from(data),
    };
    response(model, vec![output])
}

/// The metadata of a model with one BYTES input, `PROMPT`.
fn prompt_metadata() -> Value {
    json!({"name": "m", "inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1]}],
           "outputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1]}]})
}

/// A model answering every request with `answers`, whatever it asks.
fn scripted(answers: Vec<Result<InferResponse, EngineError>>) -> FakeModel {
    FakeModel::new(prompt_metadata(), move |_| answers.clone())
}

fn failed(message: &str) -> EngineError {
    EngineError::new(ErrorCode::Internal, message)
}

/// The engine every test uses: `echo`; `decoupled`; `silent`, which answers nothing; `broken`,
/// which fails; `one`, `two` and `stream`, generate models of one, two and three responses
/// (the third an error); `refuses`, which fails its first response.
fn engine() -> FakeEngine {
    FakeEngine::new()
        .with_model("echo", FakeModel::new(json!({"inputs": []}), echo))
        .with_model(
            "decoupled",
            FakeModel::new(json!({"inputs": []}), echo).decoupled(),
        )
        .with_model("silent", scripted(Vec::new()))
        .with_model("broken", scripted(vec![Err(failed("the model broke"))]))
        .with_model("one", scripted(vec![Ok(text("one", "a"))]))
        .with_model(
            "two",
            scripted(vec![Ok(text("two", "a")), Ok(text("two", "b"))]),
        )
        .with_model(
            "stream",
            scripted(vec![
                Ok(text("stream", "a")),
                Ok(text("stream", "b")),
                Err(failed("lost midway")),
            ])
            .decoupled(),
        )
        .with_model(
            "refuses",
            scripted(vec![Err(failed("no first response"))]).decoupled(),
        )
}

/// Runs `run` on a pipeline over `engine` without plugins, for a request to `model`.
async fn with_request<T>(
    engine: &FakeEngine,
    model: &str,
    body: &str,
    run: impl AsyncFnOnce(&Pipeline<'_, FakeEngine>, Request<'_>) -> T,
) -> T {
    let metrics = Metrics::default();
    let invocation = Invocation {
        content_type: Some("application/json".into()),
        ..Invocation::default()
    };
    let headers = HeaderMap::new();
    let pipeline = Pipeline {
        engine,
        plugins: None,
        metrics: &metrics,
        sessions: false,
    };
    let request = Request {
        route: "/invocations",
        model,
        invocation: &invocation,
        headers: &headers,
        body: Bytes::from(body.to_owned()),
        session: None,
    };
    run(&pipeline, request).await
}

async fn infer(model: &str, body: &str) -> Inferred {
    with_request(&engine(), model, body, async |p, r| p.infer(r).await).await
}

async fn generate(model: &str, stream: bool) -> Result<Answer, Failure> {
    let body = r#"{"PROMPT": "hi"}"#;
    with_request(&engine(), model, body, async |p, r| {
        p.generate(r, stream).await
    })
    .await
}

const TWO_INTS: &str = r#"{"inputs":[{"name":"X","datatype":"INT32","shape":[1,2],"data":[3,4]}]}"#;

#[tokio::test]
async fn a_v2_request_is_decoded_run_and_encoded() {
    let outcome = infer("echo", TWO_INTS).await;
    assert_eq!(outcome.variant, None);
    let Ok(Answer::V2(encoded)) = outcome.result else {
        panic!("not a v2 answer");
    };
    assert_eq!(encoded.content_type, "application/json");
    let json: Value = serde_json::from_slice(&encoded.parts.concat()).unwrap();
    assert_eq!(json["model_name"], "echo");
    assert_eq!(json["outputs"][0]["name"], "X_OUT");
    assert_eq!(json["outputs"][0]["data"], json!([3, 4]));
}

#[tokio::test]
async fn each_inference_failure_says_where_it_happened() {
    let failure = |outcome: Inferred| match outcome.result {
        Ok(_) => panic!("answered"),
        Err(failure) => failure,
    };
    assert!(matches!(
        failure(infer("echo", "{\"inputs\":").await),
        Failure::Decode(_)
    ));
    let unknown = failure(infer("nobody", TWO_INTS).await);
    assert!(
        matches!(&unknown, Failure::Refused(e) if e.code == ErrorCode::NotFound),
        "{unknown:?}"
    );
    let decoupled = failure(infer("decoupled", TWO_INTS).await);
    assert!(
        matches!(&decoupled, Failure::Refused(e) if e.code == ErrorCode::Unsupported && e.message == DECOUPLED_REFUSED),
        "{decoupled:?}"
    );
    let negative = r#"{"inputs":[{"name":"X","datatype":"INT32","shape":[-1],"data":[]}]}"#;
    let shape = failure(infer("echo", negative).await);
    assert!(
        matches!(&shape, Failure::Decode(_) | Failure::Refused(_)),
        "{shape:?}"
    );
    let broken = failure(infer("broken", TWO_INTS).await);
    assert_eq!(broken.message(), "the model broke");
    assert!(matches!(broken, Failure::Model(_)));
    assert!(matches!(
        failure(infer("silent", TWO_INTS).await),
        Failure::NoResponse
    ));
}

#[tokio::test]
async fn generate_answers_exactly_one_response_as_flat_json() {
    let Ok(Answer::Json(json)) = generate("one", false).await else {
        panic!("not one JSON answer");
    };
    let json: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(json["TEXT"], "a");
    assert_eq!(json["model_name"], "one");
    let Err(Failure::Model(error)) = generate("two", false).await else {
        panic!("two responses answered once");
    };
    assert!(
        error
            .message
            .starts_with("generate expects model to produce exactly 1 response")
    );
    assert!(matches!(
        generate("nobody", false).await,
        Err(Failure::Refused(e)) if e.code == ErrorCode::NotFound
    ));
}

#[tokio::test]
async fn a_stream_sends_its_events_then_at_most_one_failure() {
    let Ok(Answer::Events(mut events)) = generate("stream", true).await else {
        panic!("not a stream");
    };
    let mut received = Vec::new();
    while let Some(event) = events.recv().await {
        received.push(event);
    }
    let texts: Vec<Value> = received[..2]
        .iter()
        .map(|event| match event {
            StreamEvent::Data(payload) => {
                serde_json::from_slice::<Value>(payload).unwrap()["TEXT"].clone()
            }
            StreamEvent::Failed(message) => panic!("failed early: {message}"),
        })
        .collect();
    assert_eq!(texts, [json!("a"), json!("b")]);
    assert_eq!(received[2..], [StreamEvent::Failed("lost midway".into())]);
}

#[tokio::test]
async fn a_stream_that_fails_on_its_first_response_is_a_failed_request() {
    let Err(Failure::FirstResponse(error)) = generate("refuses", true).await else {
        panic!("not a first-response failure");
    };
    assert_eq!(error.message, "no first response");
    // The same model answered once fails as any model does.
    assert!(matches!(
        generate("refuses", false).await,
        Err(Failure::Model(_))
    ));
}
