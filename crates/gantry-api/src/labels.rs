//! Labels and the selectors that match them: label selectors (pods, namespaces) and node
//! selector terms (node affinity), with upstream's matching rules.

use smallvec::SmallVec;

use crate::Sym;

/// A set of labels, sorted by key symbol for binary search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Box<[(Sym, Sym)]>);

impl Labels {
    pub fn new(pairs: impl IntoIterator<Item = (Sym, Sym)>) -> Labels {
        let mut v: Vec<(Sym, Sym)> = pairs.into_iter().collect();
        v.sort_by_key(|e| e.0);
        v.dedup_by_key(|e| e.0);
        Labels(v.into_boxed_slice())
    }

    pub fn from_strs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Labels {
        Labels::new(pairs.into_iter().map(|(k, v)| (Sym::new(k), Sym::new(v))))
    }

    #[inline]
    pub fn get(&self, key: Sym) -> Option<Sym> {
        self.0
            .binary_search_by_key(&key, |e| e.0)
            .ok()
            .map(|i| self.0[i].1)
    }

    pub fn get_str(&self, key: &str) -> Option<Sym> {
        Sym::get(key).and_then(|k| self.get(k))
    }

    pub fn contains_key(&self, key: Sym) -> bool {
        self.get(key).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Sym, Sym)> + '_ {
        self.0.iter().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// Operators of a label selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: Sym,
    pub op: SelectorOp,
    pub values: SmallVec<[Sym; 2]>,
}

impl Requirement {
    /// Validates a label selector requirement as the API server does.
    pub fn parse(
        key: &str,
        operator: &str,
        values: &[String],
    ) -> Result<Requirement, InvalidRequirement> {
        let op = match operator {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(InvalidRequirement {
                    part: Some("operator"),
                    message: format!("must be In, NotIn, Exists or DoesNotExist, not {other:?}"),
                });
            }
        };
        let needs_values = matches!(op, SelectorOp::In | SelectorOp::NotIn);
        if needs_values == values.is_empty() {
            let message = if needs_values {
                "must be non-empty for In and NotIn"
            } else {
                "must be empty for Exists and DoesNotExist"
            };
            return Err(InvalidRequirement {
                part: Some("values"),
                message: message.to_string(),
            });
        }
        Ok(Requirement {
            key: Sym::new(key),
            op,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        })
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(self.key);
        match self.op {
            SelectorOp::In => value.is_some_and(|v| self.values.contains(&v)),
            SelectorOp::NotIn => value.is_none_or(|v| !self.values.contains(&v)),
            SelectorOp::Exists => value.is_some(),
            SelectorOp::DoesNotExist => value.is_none(),
        }
    }
}

/// A label selector (`matchLabels` turned into `In` requirements, then `matchExpressions`).
/// An empty selector matches everything; absent selectors are modelled as `Option::None`
/// by the objects that hold them, since for most of them "absent" matches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// A selector of `key=value` pairs (a `matchLabels` or a service selector).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Sym, Sym)>) -> LabelSelector {
        LabelSelector {
            requirements: pairs
                .into_iter()
                .map(|(key, value)| Requirement {
                    key,
                    op: SelectorOp::In,
                    values: smallvec::smallvec![value],
                })
                .collect(),
        }
    }
}

/// Operators of a node selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorRequirement {
    pub key: Sym,
    pub op: NodeSelectorOp,
    pub values: SmallVec<[Sym; 2]>,
}

/// Why a selector requirement is invalid: the part at fault (`operator`, `values`, or
/// `None` for the requirement as a whole) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequirement {
    pub part: Option<&'static str>,
    pub message: String,
}

impl NodeSelectorRequirement {
    /// Validates a requirement as the API server does (for `matchFields` when
    /// `field_selector`): known operator, values as the operator needs them.
    pub fn parse(
        key: &str,
        operator: &str,
        values: &[String],
        field_selector: bool,
    ) -> Result<Self, InvalidRequirement> {
        let invalid = |part, message: &str| InvalidRequirement {
            part,
            message: message.to_string(),
        };
        let op = match operator {
            "In" => NodeSelectorOp::In,
            "NotIn" => NodeSelectorOp::NotIn,
            "Exists" => NodeSelectorOp::Exists,
            "DoesNotExist" => NodeSelectorOp::DoesNotExist,
            "Gt" => NodeSelectorOp::Gt,
            "Lt" => NodeSelectorOp::Lt,
            other => {
                return Err(invalid(
                    Some("operator"),
                    &format!("must be In, NotIn, Exists, DoesNotExist, Gt or Lt, not {other:?}"),
                ));
            }
        };
        let problem = match op {
            NodeSelectorOp::In | NodeSelectorOp::NotIn if values.is_empty() => {
                Some("must be non-empty for In and NotIn")
            }
            NodeSelectorOp::Exists | NodeSelectorOp::DoesNotExist if !values.is_empty() => {
                Some("must be empty for Exists and DoesNotExist")
            }
            NodeSelectorOp::Gt | NodeSelectorOp::Lt
                if values.len() != 1 || values[0].parse::<i64>().is_err() =>
            {
                Some("must be a single integer for Gt and Lt")
            }
            _ => None,
        };
        if let Some(message) = problem {
            return Err(invalid(Some("values"), message));
        }
        if field_selector
            && (key != "metadata.name" || !matches!(op, NodeSelectorOp::In | NodeSelectorOp::NotIn))
        {
            return Err(invalid(
                None,
                "matchFields supports only metadata.name with In or NotIn",
            ));
        }
        Ok(NodeSelectorRequirement {
            key: Sym::new(key),
            op,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        })
    }

    fn matches_value(&self, value: Option<Sym>) -> bool {
        match self.op {
            NodeSelectorOp::In => value.is_some_and(|v| self.values.contains(&v)),
            NodeSelectorOp::NotIn => value.is_none_or(|v| !self.values.contains(&v)),
            NodeSelectorOp::Exists => value.is_some(),
            NodeSelectorOp::DoesNotExist => value.is_none(),
            NodeSelectorOp::Gt | NodeSelectorOp::Lt => {
                // Validation guarantees exactly one integer value; a label that is not an
                // integer does not match (upstream's labels.Requirement behaviour).
                let (Some(value), Some(bound)) = (value, self.values.first()) else {
                    return false;
                };
                let (Ok(value), Ok(bound)) =
                    (value.as_str().parse::<i64>(), bound.as_str().parse::<i64>())
                else {
                    return false;
                };
                if self.op == NodeSelectorOp::Gt {
                    value > bound
                } else {
                    value < bound
                }
            }
        }
    }
}

/// One node selector term: all expressions (on labels) and fields (on `metadata.name`) must
/// match. A term with neither matches no node, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<NodeSelectorRequirement>,
    pub match_fields: Vec<NodeSelectorRequirement>,
}

impl NodeSelectorTerm {
    /// The values the term admits for `key` through its `In` requirements (the
    /// intersection of their values), among its label expressions, or with `fields` its
    /// field requirements; `None` when no `In` requirement names the key.
    pub fn admitted_values(&self, key: Sym, fields: bool) -> Option<Vec<Sym>> {
        let requirements = if fields {
            &self.match_fields
        } else {
            &self.match_expressions
        };
        let mut admitted: Option<Vec<Sym>> = None;
        for r in requirements
            .iter()
            .filter(|r| r.key == key && r.op == NodeSelectorOp::In)
        {
            admitted = Some(match admitted {
                None => r.values.to_vec(),
                Some(previous) => previous
                    .into_iter()
                    .filter(|v| r.values.contains(v))
                    .collect(),
            });
        }
        admitted
    }

    pub fn matches(&self, node_name: Sym, labels: &Labels) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions
            .iter()
            .all(|r| r.matches_value(labels.get(r.key)))
            && self
                .match_fields
                .iter()
                .all(|r| r.matches_value(Some(node_name)))
    }
}

/// Terms combined with OR (a required node affinity).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelector {
    pub terms: Vec<NodeSelectorTerm>,
}

impl NodeSelector {
    pub fn matches(&self, node_name: Sym, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(node_name, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: NodeSelectorOp, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: Sym::new(key),
            op,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        }
    }

    #[test]
    fn label_selector_operators() {
        let labels = Labels::from_strs([("app", "web"), ("tier", "front")]);
        let sel = |op, key: &str, values: &[&str]| LabelSelector {
            requirements: vec![Requirement {
                key: Sym::new(key),
                op,
                values: values.iter().map(|v| Sym::new(v)).collect(),
            }],
        };
        assert!(sel(SelectorOp::In, "app", &["web", "db"]).matches(&labels));
        assert!(!sel(SelectorOp::In, "app", &["db"]).matches(&labels));
        assert!(sel(SelectorOp::NotIn, "app", &["db"]).matches(&labels));
        assert!(sel(SelectorOp::NotIn, "missing", &["db"]).matches(&labels));
        assert!(!sel(SelectorOp::NotIn, "app", &["web"]).matches(&labels));
        assert!(sel(SelectorOp::Exists, "tier", &[]).matches(&labels));
        assert!(sel(SelectorOp::DoesNotExist, "missing", &[]).matches(&labels));
        assert!(!sel(SelectorOp::DoesNotExist, "app", &[]).matches(&labels));
        assert!(
            LabelSelector::default().matches(&labels),
            "empty matches all"
        );
    }

    #[test]
    fn node_selector_operators() {
        let name = Sym::new("node-1");
        let labels = Labels::from_strs([("gpus", "4"), ("zone", "a"), ("weird", "x1")]);
        let term = |reqs: Vec<NodeSelectorRequirement>| NodeSelectorTerm {
            match_expressions: reqs,
            match_fields: vec![],
        };
        assert!(term(vec![req("gpus", NodeSelectorOp::Gt, &["3"])]).matches(name, &labels));
        assert!(!term(vec![req("gpus", NodeSelectorOp::Gt, &["4"])]).matches(name, &labels));
        assert!(term(vec![req("gpus", NodeSelectorOp::Lt, &["5"])]).matches(name, &labels));
        assert!(!term(vec![req("weird", NodeSelectorOp::Lt, &["5"])]).matches(name, &labels));
        assert!(!term(vec![req("absent", NodeSelectorOp::Gt, &["1"])]).matches(name, &labels));
        assert!(term(vec![req("zone", NodeSelectorOp::In, &["a", "b"])]).matches(name, &labels));
        assert!(
            !term(vec![]).matches(name, &labels),
            "empty term matches nothing"
        );
        let by_name = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", NodeSelectorOp::In, &["node-1"])],
        };
        assert!(by_name.matches(name, &labels));
        assert!(!by_name.matches(Sym::new("node-2"), &labels));
        let either = NodeSelector {
            terms: vec![term(vec![req("zone", NodeSelectorOp::In, &["z"])]), by_name],
        };
        assert!(either.matches(name, &labels), "terms are ORed");
    }
}
