//! OpenAPI schemas for the wire types whose JSON form is a string with its
//! own rules (they serialize by hand, so no derive can see the rule).

use std::borrow::Cow;

use utoipa::openapi::schema::{Object, Schema, SchemaFormat, Type};
use utoipa::openapi::{KnownFormat, RefOr};
use utoipa::{PartialSchema, ToSchema};

fn string(description: &str, pattern: Option<&str>, format: Option<SchemaFormat>) -> RefOr<Schema> {
    let mut object = Object::with_type(Type::String);
    object.description = Some(description.to_owned());
    object.pattern = pattern.map(str::to_owned);
    object.format = format;
    RefOr::T(Schema::Object(object))
}

macro_rules! string_schema {
    ($type:ty, $name:literal, $description:literal, $pattern:expr, $format:expr) => {
        impl PartialSchema for $type {
            fn schema() -> RefOr<Schema> {
                string($description, $pattern, $format)
            }
        }
        impl ToSchema for $type {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

string_schema!(
    crate::wire::Timestamp,
    "Timestamp",
    "RFC 3339 UTC time with `Z` (2026-10-02T12:00:00Z)",
    None,
    Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))
);
string_schema!(
    crate::ids::IdentityNumber,
    "IdentityNumber",
    "An identity's number: 6 to 15 digits, no leading zero",
    Some("^[1-9][0-9]{5,14}$"),
    None
);
string_schema!(
    crate::lease::LeaseOwner,
    "LeaseOwner",
    "The random owner of one claim: 32 lowercase hex digits",
    Some("^[0-9a-f]{32}$"),
    None
);
string_schema!(
    crate::lease::LeaseVersion,
    "LeaseVersion",
    "A lease's fencing version: exactly 20 digits",
    Some("^[0-9]{20}$"),
    None
);
string_schema!(
    crate::policy::ActiveHours,
    "ActiveHours",
    "A daily UTC window `HH:MM-HH:MM` (may wrap midnight)",
    Some("^[0-2][0-9]:[0-5][0-9]-[0-2][0-9]:[0-5][0-9]$"),
    None
);
