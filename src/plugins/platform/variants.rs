//! A/B variants: which weighted variant serves a request. Sticky on the inference id (the same id
//! always lands on the same variant), and a target variant that names one is honoured.

/// A weighted variant, by position in the model's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighted {
    /// The variant's name, which a target variant may name.
    pub name: String,
    /// Its share of requests, relative to the other variants' weights.
    pub weight: u32,
}

/// FNV-1a: a stable hash, so stickiness survives restarts and replicas.
pub fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Picks a variant index: the one `target` names; else by `inference_id`'s hash; else by
/// `random`. `variants` is not empty and every weight is above zero.
pub fn choose(
    variants: &[Weighted],
    target: Option<&str>,
    inference_id: Option<&str>,
    random: u64,
) -> usize {
    if let Some(index) = target.and_then(|t| variants.iter().position(|v| v.name == t)) {
        return index;
    }
    let total: u64 = variants.iter().map(|v| u64::from(v.weight)).sum();
    let mut point = inference_id.map_or(random, stable_hash) % total.max(1);
    for (index, variant) in variants.iter().enumerate() {
        let weight = u64::from(variant.weight);
        if point < weight {
            return index;
        }
        point -= weight;
    }
    variants.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ab(a: u32, b: u32) -> Vec<Weighted> {
        vec![
            Weighted {
                name: "a".into(),
                weight: a,
            },
            Weighted {
                name: "b".into(),
                weight: b,
            },
        ]
    }

    #[test]
    fn target_variant_wins() {
        assert_eq!(choose(&ab(1, 1000), Some("a"), Some("id"), 5), 0);
        assert_eq!(choose(&ab(1000, 1), Some("b"), None, 0), 1);
    }

    #[test]
    fn unknown_target_falls_back_to_weights() {
        assert_eq!(choose(&ab(1, 0), Some("zzz"), None, 7), 0);
    }

    #[test]
    fn sticky_on_inference_id() {
        let variants = ab(50, 50);
        for id in ["req-1", "req-2", "another"] {
            let first = choose(&variants, None, Some(id), 0);
            for random in 1..20 {
                assert_eq!(choose(&variants, None, Some(id), random), first);
            }
        }
    }

    #[test]
    fn split_follows_weights() {
        let variants = ab(30, 70);
        let picks_b = (0..10_000)
            .filter(|i| choose(&variants, None, Some(&format!("id-{i}")), 0) == 1)
            .count();
        assert!((6_700..7_300).contains(&picks_b), "{picks_b}");
    }
}
