//! Per-pod scratch data that plugins compute once (PreFilter, PreScore) and read per node.

use std::any::Any;

use smallvec::SmallVec;

/// Data a plugin keeps in the cycle state. Cloned when preemption simulates removing pods.
pub trait StateData: Any + Send + Sync {
    fn clone_box(&self) -> Box<dyn StateData>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A small map from plugin name to that plugin's data for the current pod (inline: the
/// default plugins keep state for about half a dozen).
#[derive(Default)]
pub struct CycleState {
    entries: SmallVec<[(&'static str, Box<dyn StateData>); 8]>,
    /// Plugins whose PreFilter said Skip: their Filter does not run. Inline: most pods
    /// skip about half of the default plugins.
    filter_skipped: SmallVec<[&'static str; 12]>,
    /// Plugins whose PreScore said Skip: their Score does not run.
    score_skipped: SmallVec<[&'static str; 12]>,
}

impl Clone for CycleState {
    fn clone(&self) -> CycleState {
        CycleState {
            entries: self
                .entries
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
            filter_skipped: self.filter_skipped.clone(),
            score_skipped: self.score_skipped.clone(),
        }
    }
}

impl CycleState {
    pub fn new() -> CycleState {
        CycleState::default()
    }

    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = Box::new(value),
            None => self.entries.push((key, Box::new(value))),
        }
    }

    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        self.entries
            .iter()
            .find(|(k, _)| same_key(k, key))
            .and_then(|(_, v)| (**v).as_any().downcast_ref())
    }

    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        self.entries
            .iter_mut()
            .find(|(k, _)| same_key(k, key))
            .and_then(|(_, v)| (**v).as_any_mut().downcast_mut())
    }

    pub fn skip_filter(&mut self, plugin: &'static str) {
        self.filter_skipped.push(plugin);
    }

    pub fn is_filter_skipped(&self, plugin: &'static str) -> bool {
        self.filter_skipped.iter().any(|p| same_key(p, plugin))
    }

    pub fn skip_score(&mut self, plugin: &'static str) {
        self.score_skipped.push(plugin);
    }

    pub fn is_score_skipped(&self, plugin: &'static str) -> bool {
        self.score_skipped.iter().any(|p| same_key(p, plugin))
    }
}

/// Keys are the plugins' `&'static str` constants: comparing the pointers first settles
/// almost every lookup (Filter reads state once per node) without comparing bytes, and
/// different names of one length (there are several of 16 bytes) mostly differ in their
/// first or last byte, which is checked before the bytes are compared.
fn same_key(a: &str, b: &str) -> bool {
    if std::ptr::eq(a, b) {
        return true;
    }
    let (x, y) = (a.as_bytes(), b.as_bytes());
    x.len() == y.len() && x.first() == y.first() && x.last() == y.last() && x == y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_plugins_are_found_by_name_not_only_by_pointer() {
        let mut state = CycleState::new();
        state.skip_filter("NodeVolumeLimits");
        // The same name at another address (a copy) is the same plugin.
        let copy: &'static str = String::from("NodeVolumeLimits").leak();
        assert!(state.is_filter_skipped(copy));
        // Same length, same first and last letters, another name.
        assert!(!state.is_filter_skipped("NodeVolumeLimitz"));
        assert!(!state.is_filter_skipped("NodeResourcesFit"));
        assert!(!state.is_filter_skipped("NodeResources"));
    }
}
