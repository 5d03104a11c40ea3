//! The OpenAPI 3.1 document, built from [`ROUTE_TABLE`] (paths, methods,
//! required scopes) and the `relayger-core::wire` types (bodies, through
//! their `utoipa::ToSchema` derives). Served at `GET /v1/openapi.json` and
//! committed as `docs/openapi.json`; a test keeps the two equal.

use std::borrow::Cow;
use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use relayger_core::ErrorEnvelope;
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::*;
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr,
    Required, ResponseBuilder, ResponsesBuilder, Schema,
};
use utoipa::{PartialSchema, ToSchema};

use crate::route_table::{ROUTE_TABLE, RouteMethod, RouteSpec};

/// The name of the bearer security scheme.
pub const BEARER: &str = "bearer";
/// The path the document is served at (not in [`ROUTE_TABLE`]: it is not
/// part of the API it describes, and needs no token).
pub const OPENAPI_PATH: &str = "/v1/openapi.json";
/// The shared response for every error status.
const ERROR_RESPONSE: &str = "Error";

type Schemas = Vec<(String, RefOr<Schema>)>;

/// A body type: its component name and how to register it (and what it
/// refers to) among the components.
#[derive(Clone, Copy)]
struct Body {
    name: fn() -> Cow<'static, str>,
    register: fn(&mut Schemas),
}

fn body<T: ToSchema>() -> Option<Body> {
    Some(Body {
        name: T::name,
        register: |schemas| {
            schemas.push((T::name().into_owned(), T::schema()));
            T::schemas(schemas);
        },
    })
}

/// What one route exchanges.
struct Exchange {
    request: Option<Body>,
    /// The success status and its body (`None`: a WebSocket upgrade).
    status: u16,
    response: Option<Body>,
    /// Query parameters: name and kind.
    query: &'static [(&'static str, Param)],
}

/// What a query parameter holds.
#[derive(Clone, Copy)]
enum Param {
    Integer,
    IdentityNumber,
    Boolean,
    /// A previous page's `next` (a UUID).
    Cursor,
    /// A previous page's `next` that is a key (a note's).
    Key,
    /// Free text (a job state).
    Text,
    /// An RFC 3339 UTC time.
    Time,
}

/// `?limit&after` of a paged list.
const PAGE: &[(&str, Param)] = &[("limit", Param::Integer), ("after", Param::Cursor)];

fn exchange(
    request: Option<Body>,
    status: u16,
    response: Option<Body>,
    query: &'static [(&'static str, Param)],
) -> Exchange {
    Exchange {
        request,
        status,
        response,
        query,
    }
}

/// Creations that answer 200 with the existing resource when repeated
/// (an identical runtime registration, a contact request already made, a
/// message resent with the same id and content).
const ALSO_200: &[(RouteMethod, &str)] = &[
    (RouteMethod::Post, "/v1/runtimes"),
    (RouteMethod::Post, "/v1/contacts/requests"),
    (RouteMethod::Post, "/v1/messages"),
];

/// The bodies of each route, as `relayger-core::wire` documents them.
fn route_exchange(method: RouteMethod, path: &str) -> Option<Exchange> {
    use RouteMethod::{Delete, Get, Post, Put};
    let none = None;
    Some(match (method, path) {
        (Get, "/healthz") => exchange(none, 200, body::<HealthResponse>(), &[]),
        (Post, "/v1/register") => exchange(
            body::<RegisterRequest>(),
            201,
            body::<RegisterResponse>(),
            &[],
        ),
        (Post, "/v1/agents") => exchange(
            body::<CreateAgentRequest>(),
            201,
            body::<RegisterResponse>(),
            &[],
        ),
        (Get, "/v1/me") | (Get, "/v1/identities/{number}") => {
            exchange(none, 200, body::<Identity>(), &[])
        }
        (Post, "/v1/tokens") => exchange(
            body::<CreateTokenRequest>(),
            201,
            body::<CreatedToken>(),
            &[],
        ),
        (Get, "/v1/tokens") => exchange(none, 200, body::<TokenList>(), PAGE),
        (Delete, "/v1/tokens/{id}") => exchange(none, 200, body::<TokenInfo>(), &[]),
        (Get, "/v1/contacts") => exchange(none, 200, body::<ContactList>(), PAGE),
        (Get, "/v1/contacts/requests") => exchange(
            none,
            200,
            body::<ContactRequests>(),
            &[
                ("as", Param::IdentityNumber),
                ("limit", Param::Integer),
                ("after", Param::Cursor),
            ],
        ),
        (Post, "/v1/contacts/requests") => exchange(
            body::<ContactNumber>(),
            201,
            body::<ContactRequestView>(),
            &[],
        ),
        (Delete, "/v1/contacts/requests/{number}") => {
            exchange(none, 200, body::<ContactRequestView>(), &[])
        }
        (Post, "/v1/contacts/requests/{number}/accept") => {
            exchange(body::<AnswerRequest>(), 200, body::<Contact>(), &[])
        }
        (Post, "/v1/contacts/requests/{number}/decline") => exchange(
            body::<AnswerRequest>(),
            200,
            body::<ContactRequestView>(),
            &[],
        ),
        (Delete, "/v1/contacts/{number}")
        | (Post, "/v1/contacts/{number}/block")
        | (Delete, "/v1/contacts/{number}/block")
        | (Post, "/v1/rooms/{room}/leave") => exchange(none, 200, body::<Done>(), &[]),
        (Get, "/v1/rooms") => exchange(none, 200, body::<RoomList>(), PAGE),
        (Post, "/v1/rooms") => exchange(body::<CreateRoomRequest>(), 201, body::<Room>(), &[]),
        (Get, "/v1/rooms/{room}") => exchange(none, 200, body::<Room>(), &[]),
        (Post, "/v1/rooms/{room}/members") => {
            exchange(body::<ContactNumber>(), 200, body::<Room>(), &[])
        }
        (Post, "/v1/rooms/{room}/ack") => {
            exchange(body::<AckRequest>(), 200, body::<AckResponse>(), &[])
        }
        (Get, "/v1/rooms/{room}/messages") => exchange(
            none,
            200,
            body::<HistoryPage>(),
            &[
                ("after", Param::Integer),
                ("before", Param::Integer),
                ("limit", Param::Integer),
            ],
        ),
        (Get, "/v1/rooms/{room}/messages/{message}") => {
            exchange(none, 200, body::<MessageEnvelope>(), &[])
        }
        (Get, "/v1/rooms/{room}/messages/{message}/thread") => exchange(
            none,
            200,
            body::<ThreadResponse>(),
            &[
                ("after", Param::Integer),
                ("limit", Param::Integer),
                ("maxBytes", Param::Integer),
            ],
        ),
        (Get, "/v1/rooms/{room}/messages/{message}/delivery")
        | (Delete, "/v1/rooms/{room}/messages/{message}/ask") => {
            exchange(none, 200, body::<Delivery>(), &[])
        }
        (Post, "/v1/messages") => {
            exchange(body::<SendRequest>(), 201, body::<MessageEnvelope>(), &[])
        }
        (Get, "/v1/inbox") => exchange(none, 200, body::<InboxResponse>(), PAGE),
        (Get, "/v1/socket") | (Get, "/v1/runtimes/{id}/socket") => exchange(
            none,
            101,
            body::<SocketSignal>(),
            &[(
                relayger_core::wire::names::RUNTIME_CHANGES_PARAM,
                Param::Boolean,
            )],
        ),
        (Post, "/v1/runtimes") => exchange(
            body::<RegisterRuntimeRequest>(),
            201,
            body::<Runtime>(),
            &[],
        ),
        (Get, "/v1/runtimes") => exchange(none, 200, body::<RuntimeList>(), &[]),
        (Get, "/v1/runtimes/{id}") => exchange(none, 200, body::<Runtime>(), &[]),
        (Delete, "/v1/runtimes/{id}") => exchange(none, 200, body::<Done>(), &[]),
        (Post, "/v1/runtimes/{id}/configure") => {
            exchange(body::<ConfigureRequest>(), 200, body::<Runtime>(), &[])
        }
        (Post, "/v1/runtimes/{id}/claim") => {
            exchange(body::<ClaimRequest>(), 200, body::<ClaimResponse>(), &[])
        }
        (Post, "/v1/runtimes/{id}/jobs/{job}/heartbeat") => exchange(
            body::<LeaseRequest>(),
            200,
            body::<HeartbeatResponse>(),
            &[],
        ),
        (Post, "/v1/runtimes/{id}/jobs/{job}/finish") => {
            exchange(body::<FinishRequest>(), 200, body::<FinishResponse>(), &[])
        }
        (Post, "/v1/runtimes/{id}/finishes") => exchange(
            body::<FinishBatchRequest>(),
            200,
            body::<FinishBatchResponse>(),
            &[],
        ),
        (Post, "/v1/runtimes/{id}/jobs/{job}/release") => {
            exchange(body::<LeaseRequest>(), 200, body::<Done>(), &[])
        }
        (Post, "/v1/runtimes/{id}/jobs/{job}/retry") => exchange(none, 200, body::<JobView>(), &[]),
        (Get, "/v1/runtimes/{id}/dead-letters") => exchange(none, 200, body::<JobList>(), PAGE),
        (Get, "/v1/runtimes/{id}/log") => {
            exchange(none, 200, body::<LogPage>(), &[("limit", Param::Integer)])
        }
        (Get, "/v1/runtimes/{id}/stats") => exchange(none, 200, body::<RuntimeStats>(), &[]),
        (Get, "/v1/runtimes/{id}/activity") => exchange(none, 200, body::<RuntimeActivity>(), &[]),
        (Get, "/v1/runtimes/{id}/jobs") => exchange(
            none,
            200,
            body::<JobSearchPage>(),
            &[
                ("state", Param::Text),
                ("room", Param::Cursor),
                ("sender", Param::IdentityNumber),
                ("since", Param::Time),
                ("until", Param::Time),
                ("limit", Param::Integer),
                ("after", Param::Cursor),
            ],
        ),
        (Get, "/v1/runtimes/{id}/jobs/{job}") => exchange(none, 200, body::<JobDetail>(), &[]),
        (Get, "/v1/runtimes/{id}/notes/{room}") => exchange(
            none,
            200,
            body::<NoteList>(),
            &[("limit", Param::Integer), ("after", Param::Key)],
        ),
        (Put, "/v1/runtimes/{id}/notes/{room}/{key}") => {
            exchange(body::<NoteWrite>(), 200, body::<Note>(), &[])
        }
        (Get, "/a2a/{number}/.well-known/agent-card.json") => {
            exchange(none, 200, body::<A2aAgentCard>(), &[])
        }
        (Post, "/a2a/{number}") => exchange(
            body::<A2aJsonRpcRequest>(),
            200,
            body::<A2aJsonRpcResponse>(),
            &[],
        ),
        _ => return None,
    })
}

/// The bodies of the A2A routes: A2A 1.0's own shapes (protobuf's JSON of
/// `lf.a2a.v1`, see docs/a2a.md), documented here as objects.
macro_rules! a2a_object {
    ($name:ident, $description:literal) => {
        struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                RefOr::T(Schema::Object(
                    ObjectBuilder::new()
                        .schema_type(Type::Object)
                        .description(Some($description))
                        .build(),
                ))
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    };
}

a2a_object!(
    A2aAgentCard,
    "An A2A 1.0 AgentCard: the agent's display name, one JSONRPC interface at /a2a/{number}, streaming, HTTP bearer security, text/plain in and out"
);
a2a_object!(
    A2aJsonRpcRequest,
    "A JSON-RPC 2.0 request of A2A 1.0: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask or SubscribeToTask with its params"
);
a2a_object!(
    A2aJsonRpcResponse,
    "A JSON-RPC 2.0 response (result or an A2A error object, status 200); SendStreamingMessage and SubscribeToTask answer text/event-stream, each event's data one such response"
);

fn reference(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

fn json_content(name: &str) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(reference(name))).build()
}

fn path_parameter(path: &str, name: &str) -> utoipa::openapi::path::Parameter {
    let schema = match name {
        "number" => reference(&IdentityNumber::name()),
        // A dead letter, or a job read in full, is named by its jobId, its
        // message id or its jobKey.
        "job" if path.ends_with("/retry") || path.ends_with("/jobs/{job}") => {
            RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some(relayger_core::lookup::JOB_REF_RULE))
                    .build(),
            ))
        }
        "key" => RefOr::T(Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .build(),
        )),
        _ => uuid_schema(),
    };
    parameter(name, ParameterIn::Path, Required::True, schema)
}

fn query_parameter(name: &str, param: Param) -> utoipa::openapi::path::Parameter {
    let schema = match param {
        Param::IdentityNumber => reference(&IdentityNumber::name()),
        Param::Integer => RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::Integer).build(),
        )),
        Param::Boolean => RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::Boolean).build(),
        )),
        Param::Cursor => uuid_schema(),
        Param::Key | Param::Text => RefOr::T(Schema::Object(
            ObjectBuilder::new().schema_type(Type::String).build(),
        )),
        Param::Time => RefOr::T(Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
                .build(),
        )),
    };
    parameter(name, ParameterIn::Query, Required::False, schema)
}

fn uuid_schema() -> RefOr<Schema> {
    RefOr::T(Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
            .build(),
    ))
}

fn parameter(
    name: &str,
    place: ParameterIn,
    required: Required,
    schema: RefOr<Schema>,
) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(place)
        .required(required)
        .schema(Some(schema))
        .build()
}

fn operation(spec: &RouteSpec, exchange: &Exchange, schemas: &mut Schemas) -> OperationBuilder {
    let id = format!(
        "{}{}",
        spec.method.as_str().to_ascii_lowercase(),
        spec.path
            .split(['/', '{', '}', '-', '.'])
            .filter(|part| !part.is_empty())
            .map(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            })
            .collect::<String>()
    );
    let mut op = OperationBuilder::new()
        .operation_id(Some(id))
        .extensions(Some(
            ExtensionsBuilder::new()
                .add("x-relayger-access", format!("{:?}", spec.access))
                .build(),
        ));
    for part in spec.path.split('/') {
        if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            op = op.parameter(path_parameter(spec.path, name));
        }
    }
    for (name, param) in exchange.query {
        op = op.parameter(query_parameter(name, *param));
    }
    if let Some(request) = exchange.request {
        (request.register)(schemas);
        op = op.request_body(Some(
            RequestBodyBuilder::new()
                .content("application/json", json_content(&(request.name)()))
                .required(Some(Required::True))
                .build(),
        ));
    }
    let mut success = ResponseBuilder::new().description(if spec.socket {
        "WebSocket upgrade; text frames carry the schema's JSON"
    } else {
        "Success"
    });
    if let Some(response) = exchange.response {
        (response.register)(schemas);
        success = success.content("application/json", json_content(&(response.name)()));
    }
    let success = success.build();
    let mut responses =
        ResponsesBuilder::new().response(exchange.status.to_string(), success.clone());
    if ALSO_200.contains(&(spec.method, spec.path)) {
        let mut repeated = success;
        repeated.description = "The existing resource, for a repeated identical request".into();
        responses = responses.response("200", repeated);
    }
    op = op.responses(
        responses
            .response("default", Ref::from_response_name(ERROR_RESPONSE))
            .build(),
    );
    if spec.access.needs_token() {
        let scopes: Vec<&str> = spec.access.scopes().iter().map(|s| s.as_str()).collect();
        op = op.security(SecurityRequirement::new(BEARER, scopes));
    }
    op
}

fn http_method(method: RouteMethod) -> HttpMethod {
    match method {
        RouteMethod::Get => HttpMethod::Get,
        RouteMethod::Post => HttpMethod::Post,
        RouteMethod::Put => HttpMethod::Put,
        RouteMethod::Delete => HttpMethod::Delete,
    }
}

/// The whole document. Panics if a route of [`ROUTE_TABLE`] has no entry
/// in the body table (a test builds it, so a new route cannot ship without
/// one).
pub fn document() -> OpenApi {
    let mut paths = Paths::new();
    let mut schemas: Schemas = Vec::new();
    (body::<ErrorEnvelope>().expect("body").register)(&mut schemas);
    schemas.push((
        IdentityNumber::name().into_owned(),
        IdentityNumber::schema(),
    ));
    for spec in ROUTE_TABLE {
        let exchange = route_exchange(spec.method, spec.path).unwrap_or_else(|| {
            panic!(
                "{} {} has no entry in the OpenAPI body table",
                spec.method.as_str(),
                spec.path
            )
        });
        let op = operation(spec, &exchange, &mut schemas);
        paths.add_path_operation(spec.path, vec![http_method(spec.method)], op.build());
    }
    // Sorted and deduplicated: the document is the same on every build.
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    schemas.dedup_by(|a, b| a.0 == b.0);
    let error = ResponseBuilder::new()
        .description("The error envelope, for every error status")
        .content("application/json", json_content(&ErrorEnvelope::name()))
        .build();
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .response(ERROR_RESPONSE, error)
        .security_scheme(
            BEARER,
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Relayger")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Durable messaging for people and agents. Errors are always \
                     `{\"error\":{\"code\",\"message\"}}`; a security requirement's \
                     list names the token scopes the route needs.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components))
        .build()
}

/// The document as served and committed: pretty JSON with a final newline.
pub fn document_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut text = document()
            .to_pretty_json()
            .unwrap_or_else(|err| panic!("the OpenAPI document serializes: {err}"));
        text.push('\n');
        text
    })
}

/// `GET /v1/openapi.json`.
pub(crate) async fn serve_document() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_json(),
    )
}
