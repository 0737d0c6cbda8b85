//! Per-pod scratch data that plugins compute once (PreFilter, PreScore) and read per node.

use std::any::Any;
use std::sync::Arc;

use gantry_api::small_copy::copy_into;
use smallvec::SmallVec;

/// Data a plugin keeps in the cycle state. Copied when a copy of the state (preemption's
/// per-node trial, the nominated pods' filter run) is about to change it.
pub trait StateData: Any + Send + Sync {
    fn clone_arc(&self) -> Arc<dyn StateData>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_arc(&self) -> Arc<dyn StateData> {
        Arc::new(self.clone())
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
///
/// Cloning shares the data and copies an entry only when a copy writes to it
/// (`read_mut`): preemption clones the state for every node it tries, and the plugins
/// whose data its pod removals change are one or two of the half dozen.
#[derive(Default)]
pub struct CycleState {
    entries: SmallVec<[(&'static str, Arc<dyn StateData>); 8]>,
    /// Plugins whose PreFilter said Skip: their Filter does not run. Inline: most pods
    /// skip about half of the default plugins.
    filter_skipped: SmallVec<[&'static str; 12]>,
    /// Plugins whose PreScore said Skip: their Score does not run.
    score_skipped: SmallVec<[&'static str; 12]>,
    /// The cycle's time, in seconds since the epoch (the simulation's virtual time), for
    /// what plugins compare with times on objects (a claim's `allocationTimestamp`).
    now: i64,
}

/// By hand, so that `clone_from` (preemption's copy per node it tries) reuses the
/// copy's buffers. Destructured: a new field that is not copied does not compile.
impl Clone for CycleState {
    fn clone(&self) -> CycleState {
        let CycleState {
            entries,
            filter_skipped,
            score_skipped,
            now,
        } = self;
        CycleState {
            entries: entries.clone(),
            filter_skipped: SmallVec::from_slice(filter_skipped),
            score_skipped: SmallVec::from_slice(score_skipped),
            now: *now,
        }
    }

    fn clone_from(&mut self, source: &CycleState) {
        let CycleState {
            entries,
            filter_skipped,
            score_skipped,
            now,
        } = source;
        self.entries.clone_from(entries);
        copy_into(&mut self.filter_skipped, filter_skipped);
        copy_into(&mut self.score_skipped, score_skipped);
        self.now = *now;
    }
}

impl CycleState {
    pub fn new() -> CycleState {
        CycleState::default()
    }

    /// A state for a cycle at `now` (seconds since the epoch).
    pub fn at(now: i64) -> CycleState {
        CycleState {
            now,
            ..CycleState::default()
        }
    }

    /// The cycle's time, in seconds since the epoch (0 unless the cycle was given one).
    pub fn now(&self) -> i64 {
        self.now
    }

    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        self.write_shared(key, Arc::new(value));
    }

    /// Writes data shared with other cycles, as the one empty value every pod without
    /// terms or tolerations gets: no allocation per pod (a `read_mut` copies it first).
    pub fn write_shared<T: StateData>(&mut self, key: &'static str, value: Arc<T>) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// A mark of the data written so far, for [`CycleState::drop_written_since`].
    pub fn mark(&self) -> StateMark {
        StateMark(self.entries.len())
    }

    /// Drops the data of every key first written after `mark` (a key written before it
    /// and written again since is kept). The scheduler drops PreScore's data once Score
    /// is done: only Score reads it, and a pod's state lives on through its binding cycle.
    pub fn drop_written_since(&mut self, mark: StateMark) {
        self.entries.truncate(mark.0);
    }

    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        self.entries
            .iter()
            .find(|(k, _)| same_key(k, key))
            .and_then(|(_, v)| (**v).as_any().downcast_ref())
    }

    /// The plugin's data to change, copied first if a clone of this state shares it.
    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        let (_, data) = self.entries.iter_mut().find(|(k, _)| same_key(k, key))?;
        if Arc::get_mut(data).is_none() {
            // `**data`: the data itself (an `Arc` is `StateData` too, and would be wrapped).
            *data = (**data).clone_arc();
        }
        let data: &mut dyn StateData = Arc::get_mut(data)?;
        data.as_any_mut().downcast_mut()
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

/// The number of keys a state held at some point: new keys are appended.
#[derive(Clone, Copy, Debug)]
pub struct StateMark(usize);

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

    #[derive(Clone, Debug, PartialEq)]
    struct Count(u32);

    #[test]
    fn dropping_since_a_mark_keeps_the_keys_written_before_it() {
        let mut state = CycleState::new();
        state.write("A", Count(1));
        let mark = state.mark();
        state.write("B", Count(2));
        state.write("A", Count(3));
        state.drop_written_since(mark);
        assert_eq!(state.read::<Count>("A"), Some(&Count(3)));
        assert_eq!(state.read::<Count>("B"), None);
    }

    #[test]
    fn a_clone_shares_the_data_until_one_side_writes() {
        let mut original = CycleState::new();
        original.write("A", Count(1));
        original.write("B", Count(10));
        original.skip_filter("A");
        let mut copy = original.clone();
        let address = |s: &CycleState, key| s.read::<Count>(key).map(|c| c as *const Count);
        assert_eq!(
            address(&copy, "A"),
            address(&original, "A"),
            "shared, not copied"
        );
        copy.read_mut::<Count>("A").expect("written").0 = 2;
        assert_eq!(
            original.read::<Count>("A"),
            Some(&Count(1)),
            "the original is untouched"
        );
        assert_eq!(copy.read::<Count>("A"), Some(&Count(2)));
        assert_ne!(address(&copy, "A"), address(&original, "A"));
        assert_eq!(
            address(&copy, "B"),
            address(&original, "B"),
            "only what was written is copied"
        );
        // A second write to the now unshared data copies nothing.
        let before = address(&copy, "A");
        copy.read_mut::<Count>("A").expect("written").0 = 3;
        assert_eq!(address(&copy, "A"), before);
        // clone_from brings back the source's data and skip lists.
        let mut reused = CycleState::new();
        reused.skip_score("C");
        reused.clone_from(&original);
        assert_eq!(reused.read::<Count>("A"), Some(&Count(1)));
        assert!(reused.is_filter_skipped("A") && !reused.is_score_skipped("C"));
    }

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
