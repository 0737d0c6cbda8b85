//! `generateName` without `name`, as the API server names such objects (apiserver's
//! `names.SimpleNameGenerator`): the prefix, cut to 58 characters, then five characters
//! from `bcdfghjklmnpqrstvwxz2456789`. The characters come from a fixed-seed generator, so
//! the same input always gets the same names.

use serde_json::Value;

use crate::rng::Rng;

/// apiserver's `utilrand` alphabet: no vowels, no look-alikes.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const RANDOM_LENGTH: usize = 5;
/// `maxNameLength` (63) minus the random part.
const MAX_PREFIX_LENGTH: usize = 63 - RANDOM_LENGTH;
/// The generator's seed: fixed, so that names do not change from run to run.
const SEED: u64 = 0x6761_6e74_7279;

/// The pods and nodes (indices) named from `generateName`, and the generator.
#[derive(Debug, Clone)]
pub(super) struct Generated {
    pub pods: Vec<usize>,
    pub nodes: Vec<usize>,
    rng: Rng,
}

impl Default for Generated {
    fn default() -> Generated {
        Generated {
            pods: Vec::new(),
            nodes: Vec::new(),
            rng: Rng::new(SEED),
        }
    }
}

impl Generated {
    /// These records for objects that will sit after `pods` pods and `nodes` nodes.
    pub fn shifted(self, pods: usize, nodes: usize) -> Generated {
        Generated {
            pods: self.pods.into_iter().map(|i| i + pods).collect(),
            nodes: self.nodes.into_iter().map(|i| i + nodes).collect(),
            rng: self.rng,
        }
    }

    /// Takes `other`'s records (its generator is dropped: this one goes on).
    pub fn extend(&mut self, other: Generated) {
        self.pods.extend(other.pods);
        self.nodes.extend(other.nodes);
    }

    /// A name for `generate_name`: the prefix (at most 58 bytes) and five random characters.
    pub fn name(&mut self, generate_name: &str) -> String {
        let mut cut = generate_name.len().min(MAX_PREFIX_LENGTH);
        while !generate_name.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut name = String::with_capacity(cut + RANDOM_LENGTH);
        name.push_str(&generate_name[..cut]);
        while name.len() < cut + RANDOM_LENGTH {
            // Five bits at a time, rejecting those past the alphabet (as utilrand does).
            let mut bits = self.rng.next_u64();
            for _ in 0..12 {
                let index = (bits & 31) as usize;
                bits >>= 5;
                if index < ALPHABET.len() && name.len() < cut + RANDOM_LENGTH {
                    name.push(ALPHABET[index] as char);
                }
            }
        }
        name
    }

    /// Gives an object with `metadata.generateName` and no `metadata.name` a name;
    /// says whether it did.
    pub fn name_object(&mut self, value: &mut Value) -> bool {
        let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
            return false;
        };
        let has_name = metadata
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let prefix = match metadata.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !has_name && !prefix.is_empty() => prefix.to_string(),
            _ => return false,
        };
        let name = self.name(&prefix);
        metadata.insert("name".into(), Value::String(name));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_five_characters_of_the_alphabet() {
        let mut generated = Generated::default();
        let name = generated.name("pod-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("pod-"));
        assert!(name[4..].bytes().all(|b| ALPHABET.contains(&b)), "{name}");
        assert_ne!(generated.name("pod-"), name, "the sequence moves on");
    }

    #[test]
    fn long_prefixes_are_cut_to_58() {
        let mut generated = Generated::default();
        let name = generated.name(&"a".repeat(80));
        assert_eq!(name.len(), 63);
        assert_eq!(&name[..58], "a".repeat(58));
        // A multi-byte character at the cut is not split (the name is invalid anyway).
        let name = generated.name(&format!("{}é", "a".repeat(57)));
        assert!(name.starts_with(&"a".repeat(57)) && name.len() == 62);
    }

    #[test]
    fn same_seed_same_names() {
        let names = |n| {
            let mut g = Generated::default();
            (0..n).map(|_| g.name("x-")).collect::<Vec<_>>()
        };
        assert_eq!(names(100), names(100));
    }
}
