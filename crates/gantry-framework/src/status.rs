//! Plugin verdicts, as upstream's `framework.Status`.

use std::borrow::Cow;

use smallvec::SmallVec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Success,
    /// The pod does not fit, but preempting pods might make it fit.
    Unschedulable,
    /// The pod does not fit and preemption cannot help.
    UnschedulableAndUnresolvable,
    Error,
    /// The plugin has nothing to do for this pod (its later extension points are skipped).
    Skip,
    /// Permit: wait before binding.
    Wait,
}

/// A verdict with reasons (`Insufficient cpu`) and the plugin that gave it.
#[derive(Debug, PartialEq, Eq)]
pub struct Status {
    code: Code,
    reasons: SmallVec<[Cow<'static, str>; 1]>,
    plugin: &'static str,
}

/// By hand: a status of one reason, as most are, is copied without SmallVec's general
/// `extend` (a pod that fits none of thousands of full nodes copies one per node).
impl Clone for Status {
    fn clone(&self) -> Status {
        let reasons = match self.reasons.as_slice() {
            [one] => SmallVec::from_buf([one.clone()]),
            reasons => reasons.iter().cloned().collect(),
        };
        Status {
            code: self.code,
            reasons,
            plugin: self.plugin,
        }
    }
}

impl Status {
    pub fn success() -> Status {
        Status {
            code: Code::Success,
            reasons: SmallVec::new(),
            plugin: "",
        }
    }

    pub fn new(code: Code, reason: impl Into<Cow<'static, str>>) -> Status {
        let mut reasons = SmallVec::new();
        reasons.push(reason.into());
        Status {
            code,
            reasons,
            plugin: "",
        }
    }

    pub fn unschedulable(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Unschedulable, reason)
    }

    pub fn unresolvable(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    pub fn error(reason: impl Into<Cow<'static, str>>) -> Status {
        Status::new(Code::Error, reason)
    }

    /// A status of `code` that gives no reason (`NewStatus(code)`).
    pub fn without_reason(code: Code) -> Status {
        Status {
            code,
            reasons: SmallVec::new(),
            plugin: "",
        }
    }

    pub fn skip() -> Status {
        Status {
            code: Code::Skip,
            reasons: SmallVec::new(),
            plugin: "",
        }
    }

    pub fn with_reason(mut self, reason: impl Into<Cow<'static, str>>) -> Status {
        self.reasons.push(reason.into());
        self
    }

    /// The same reasons under another code.
    pub fn with_code(mut self, code: Code) -> Status {
        self.code = code;
        self
    }

    pub fn with_plugin(mut self, plugin: &'static str) -> Status {
        self.plugin = plugin;
        self
    }

    pub fn code(&self) -> Code {
        self.code
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Unschedulable or UnschedulableAndUnresolvable.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }

    pub fn reasons(&self) -> impl Iterator<Item = &str> {
        self.reasons.iter().map(|r| r.as_ref())
    }

    /// The plugin that gave this verdict.
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// Reasons joined with ", ", as upstream's `Status.Message()`.
    pub fn message(&self) -> String {
        self.reasons().collect::<Vec<_>>().join(", ")
    }
}

impl Default for Status {
    fn default() -> Status {
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written clone copies every reason, the code and the plugin.
    #[test]
    fn a_clone_is_equal_whatever_its_reasons() {
        let statuses = [
            Status::success(),
            Status::unschedulable("Insufficient cpu").with_plugin("NodeResourcesFit"),
            Status::error(format!("owned {}", 1)),
            Status::unresolvable("a")
                .with_reason("b")
                .with_reason(String::from("c")),
        ];
        for status in statuses {
            let copy = status.clone();
            assert_eq!(copy, status);
            assert_eq!(copy.reasons().count(), status.reasons().count());
        }
    }
}
