//! A small OTLP/HTTP receiver of traces for the tests: it decodes what an OpenTelemetry
//! exporter posts to `/v1/traces` (protobuf, the OTLP default) and keeps every span.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use tokio::net::TcpListener;

/// One span as received, its ids in hex.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// Each attribute as text (numbers and booleans printed).
    pub attributes: BTreeMap<String, String>,
    /// The messages of the span's events (its log lines).
    pub events: Vec<String>,
    /// The service the exporter says it is (`service.name` of its resource).
    pub service: String,
}

/// A receiver listening on loopback until dropped.
pub struct Receiver {
    /// The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept(listener, spans.clone()));
        Receiver {
            endpoint,
            spans,
            task,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

async fn accept(listener: TcpListener, spans: Arc<Mutex<Vec<ReceivedSpan>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let spans = spans.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let spans = spans.clone();
                async move { Ok::<_, Infallible>(receive(request, &spans).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn receive(
    request: Request<hyper::body::Incoming>,
    spans: &Mutex<Vec<ReceivedSpan>>,
) -> Response<Full<Bytes>> {
    let respond = |status: StatusCode, body: Vec<u8>| {
        Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };
    if request.uri().path() != "/v1/traces" {
        return respond(StatusCode::NOT_FOUND, Vec::new());
    }
    let Ok(body) = request.into_body().collect().await else {
        return respond(StatusCode::BAD_REQUEST, Vec::new());
    };
    let Ok(export) = ExportTraceServiceRequest::decode(body.to_bytes()) else {
        return respond(StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut received = Vec::new();
    for resource_spans in export.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .map(|a| text(a.value.as_ref().and_then(|v| v.value.as_ref())))
            .unwrap_or_default();
        for span in resource_spans
            .scope_spans
            .into_iter()
            .flat_map(|scope| scope.spans)
        {
            received.push(ReceivedSpan {
                trace_id: hex::encode(&span.trace_id),
                span_id: hex::encode(&span.span_id),
                parent_span_id: hex::encode(&span.parent_span_id),
                name: span.name,
                attributes: span
                    .attributes
                    .iter()
                    .map(|a| {
                        (
                            a.key.clone(),
                            text(a.value.as_ref().and_then(|v| v.value.as_ref())),
                        )
                    })
                    .collect(),
                events: span.events.into_iter().map(|e| e.name).collect(),
                service: service.clone(),
            });
        }
    }
    spans
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(received);
    respond(
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

fn text(value: Option<&AnyValue>) -> String {
    match value {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
