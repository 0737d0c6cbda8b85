//! One page of a list as the API server answers it (`GET /api/v1/pods?limit=500`): a
//! typed list (`PodList`) whose items carry no `kind` or `apiVersion` (the list's say
//! them), and whose `metadata.continue` names the next page. Its items are converted as
//! a dump's are, in parallel batches, with the same validation and admission.

use serde_json::Value;

use super::strict_value::StrictValue;
use super::{ClusterObjects, DecodeError, ObjectError};

/// What a page says beyond its items.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiListPage {
    /// The token for the next page; `None` on the last.
    pub continue_token: Option<String>,
    /// The list's `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// How many items the page held.
    pub items: usize,
}

impl ClusterObjects {
    /// Adds the items of one page of an API list (`source_name` names it in errors:
    /// `https://host:6443 pods page 3`). The page must be a typed list (`kind` ending in
    /// `List`); an item without `kind` or `apiVersion` takes the list's.
    pub fn add_api_list(
        &mut self,
        page: &[u8],
        source_name: &str,
    ) -> Result<ApiListPage, DecodeError> {
        let syntax = |message: String| DecodeError::Syntax {
            source_name: source_name.to_string(),
            message,
        };
        let object = |error: ObjectError| DecodeError::Object {
            source_name: source_name.to_string(),
            error,
        };
        let StrictValue(mut list) =
            serde_json::from_slice(page).map_err(|e| syntax(e.to_string()))?;
        let list_kind = list
            .get("kind")
            .and_then(Value::as_str)
            .filter(|kind| kind.len() > "List".len() && kind.ends_with("List"))
            .ok_or_else(|| {
                object(list_error(
                    "kind",
                    "must name a typed list (PodList, NodeList...)",
                ))
            })?
            .to_string();
        let item_kind = list_kind.trim_end_matches("List").to_string();
        let api_version = list
            .get("apiVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| object(list_error("apiVersion", "missing or not a string")))?
            .to_string();
        let metadata_string = |field: &str| {
            list.get("metadata")
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let mut answer = ApiListPage {
            continue_token: metadata_string("continue"),
            resource_version: metadata_string("resourceVersion"),
            items: 0,
        };
        let items = match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            Some(Value::Null) | None => Vec::new(),
            Some(_) => return Err(object(list_error("items", "must be a list"))),
        };
        answer.items = items.len();
        let values = items.into_iter().enumerate().map(|(index, mut item)| {
            if let Value::Object(fields) = &mut item {
                fields
                    .entry("kind")
                    .or_insert_with(|| Value::String(item_kind.clone()));
                fields
                    .entry("apiVersion")
                    .or_insert_with(|| Value::String(api_version.clone()));
            }
            (item, format!("{list_kind} items[{index}]"))
        });
        self.add_values(values, source_name)?;
        self.note_source(source_name);
        Ok(answer)
    }
}

fn list_error(field: &str, message: &str) -> ObjectError {
    ObjectError {
        object: "the list".into(),
        field: field.into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str) -> Result<(ClusterObjects, ApiListPage), DecodeError> {
        let mut objects = ClusterObjects::default();
        let page = objects.add_api_list(text.as_bytes(), "server pods page 1")?;
        Ok((objects, page))
    }

    #[test]
    fn items_take_the_lists_kind_and_the_page_says_what_comes_next() {
        let (objects, answer) = page(
            r#"{"kind":"NodeList","apiVersion":"v1",
                "metadata":{"resourceVersion":"42","continue":"abc"},
                "items":[{"metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"4"}}},
                         {"metadata":{"name":"n2"},"status":{"allocatable":{"cpu":"8"}}}]}"#,
        )
        .unwrap();
        let names: Vec<&str> = objects.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2"]);
        assert_eq!(
            answer,
            ApiListPage {
                continue_token: Some("abc".into()),
                resource_version: Some("42".into()),
                items: 2,
            }
        );
    }

    #[test]
    fn the_last_page_has_no_continue_token_and_may_have_no_items() {
        let (objects, answer) =
            page(r#"{"kind":"PodList","apiVersion":"v1","metadata":{"continue":""},"items":null}"#)
                .unwrap();
        assert!(objects.pods.is_empty());
        assert_eq!(answer.continue_token, None);
        assert_eq!(answer.items, 0);
    }

    #[test]
    fn an_item_is_validated_as_in_a_dump_and_named_with_the_page() {
        let error = page(
            r#"{"kind":"PodList","apiVersion":"v1","items":[
                {"metadata":{"name":"Bad_Name","namespace":"default"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("server pods page 1: Pod default/Bad_Name: metadata.name"),
            "{error}"
        );
    }

    #[test]
    fn what_is_not_a_typed_list_is_refused() {
        for (text, expected) in [
            (
                r#"{"kind":"Pod","apiVersion":"v1"}"#,
                "the list: kind: must name a typed list",
            ),
            (
                r#"{"kind":"List","apiVersion":"v1","items":[]}"#,
                "the list: kind: must name a typed list",
            ),
            (
                r#"{"kind":"PodList","items":[]}"#,
                "the list: apiVersion: missing",
            ),
            (
                r#"{"kind":"PodList","apiVersion":"v1","items":{}}"#,
                "the list: items: must be a list",
            ),
            (
                r#"{"kind":"PodList","kind":"NodeList"}"#,
                "not valid YAML or JSON: duplicate field",
            ),
            ("<html>", "not valid YAML or JSON"),
        ] {
            let error = page(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
