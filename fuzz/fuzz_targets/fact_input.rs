//! The JSON fact input of `POST /api/facts` and `POST /api/facts/batch`:
//! `tempora::http::extract::parse_json` into the handlers' body types
//! (`Object<FactBody>`, `BatchBody`), the conversion to the engine's
//! `FactInput`, and the engine's checks (`tempora_storage::validate_input`),
//! then the index form of the object (`keys::object_key`), as a write would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tempora::http::extract::{parse_json, Object};
use tempora::http::facts::{BatchBody, FactBody};
use tempora_storage::{keys, validate_input, FactInput};

fn check(body: FactBody) {
    let input = FactInput::from(body);
    if validate_input(&input).is_ok() {
        assert!(!input.subject.trim().is_empty() && !input.predicate.trim().is_empty());
        let _ = keys::object_key(&input.object);
    }
}

fuzz_target!(|data: &[u8]| {
    match parse_json::<Object<FactBody>>(data) {
        Ok(Object(body)) => check(body),
        Err(e) => assert!(!e.message.is_empty()),
    }
    if let Ok(BatchBody(facts)) = parse_json::<BatchBody>(data) {
        for Object(body) in facts {
            check(body);
        }
    }
});
