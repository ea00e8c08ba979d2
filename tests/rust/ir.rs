//! The merged IR (bindings/ir/api/nccl.json, every header set) for tests that check the
//! bindings against it instead of restating its facts: `mod ir;` in a test crate (Bazel:
//! add ir.rs to srcs and //bindings:generated to compile_data).
#![allow(dead_code)]

/// The merged API of libnccl, as the renderers read it.
pub const API_IR: &str = include_str!("../../bindings/ir/api/nccl.json");

/// The JSON the IR uses, parsed by hand: the crate and its tests take no crates.
#[derive(Debug)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Json {
        let mut chars = text.chars().peekable();
        let value = Self::value(&mut chars);
        assert!(chars.all(char::is_whitespace), "text after the JSON value");
        value
    }

    fn value(chars: &mut std::iter::Peekable<std::str::Chars>) -> Json {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.next().expect("a JSON value") {
            '{' => Json::Object(Self::items(chars, '}', |chars| {
                let Json::String(key) = Self::value(chars) else {
                    panic!("an object key")
                };
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                assert_eq!(chars.next(), Some(':'));
                (key, Self::value(chars))
            })),
            '[' => Json::Array(Self::items(chars, ']', Self::value)),
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next().expect("a closing quote") {
                        '"' => break Json::String(s),
                        '\\' => match chars.next().expect("an escape") {
                            'n' => s.push('\n'),
                            't' => s.push('\t'),
                            'u' => {
                                let hex: String = chars.by_ref().take(4).collect();
                                s.push(
                                    char::from_u32(u32::from_str_radix(&hex, 16).unwrap())
                                        .unwrap_or('?'),
                                );
                            }
                            c => s.push(c),
                        },
                        c => s.push(c),
                    }
                }
            }
            c => {
                let mut word = c.to_string();
                while let Some(c) = chars.next_if(|c| !",]} \n\t\r".contains(*c)) {
                    word.push(c);
                }
                match word.as_str() {
                    "null" => Json::Null,
                    "true" => Json::Bool(true),
                    "false" => Json::Bool(false),
                    number => Json::Number(number.parse().expect("a JSON number")),
                }
            }
        }
    }

    fn items<T>(
        chars: &mut std::iter::Peekable<std::str::Chars>,
        close: char,
        mut item: impl FnMut(&mut std::iter::Peekable<std::str::Chars>) -> T,
    ) -> Vec<T> {
        let mut items = Vec::new();
        loop {
            while chars.next_if(|c| c.is_whitespace() || *c == ',').is_some() {}
            if chars.next_if_eq(&close).is_some() {
                return items;
            }
            items.push(item(chars));
        }
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// The merged API, parsed.
pub fn api() -> Json {
    Json::parse(API_IR)
}

/// The string at `key` of `json`.
pub fn str_at<'a>(json: &'a Json, key: &str) -> &'a str {
    match json.get(key) {
        Some(Json::String(s)) => s,
        other => panic!("{key}: not a string: {other:?}"),
    }
}

/// The entry named `name` in the IR's list `list` ("functions", "enums", "initializers", ...).
pub fn named<'a>(api: &'a Json, list: &str, name: &str) -> &'a Json {
    let Some(Json::Array(items)) = api.get(list) else {
        panic!("the IR has no {list}")
    };
    items
        .iter()
        .find(|item| matches!(item.get("name"), Some(Json::String(n)) if n == name))
        .unwrap_or_else(|| panic!("the IR has no {name} in {list}"))
}

/// The version code of the IR's version name ("2.29.7"), from its version_codes table.
pub fn version_code(api: &Json, version: &str) -> i32 {
    match api
        .get("version_codes")
        .and_then(|codes| codes.get(version))
    {
        Some(Json::Number(code)) => *code as i32,
        other => panic!("no version code for {version}: {other:?}"),
    }
}

/// The header sets' versions, oldest first.
pub fn versions(api: &Json) -> Vec<String> {
    let Some(Json::Array(versions)) = api.get("versions") else {
        panic!("the IR has no versions")
    };
    versions
        .iter()
        .map(|v| match v {
            Json::String(s) => s.clone(),
            other => panic!("a version: {other:?}"),
        })
        .collect()
}
