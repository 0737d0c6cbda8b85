//! The report's PodGroup section (GangScheduling on): each group's `PodGroupScheduled`
//! condition as the scheduler would write it, the pod-group cycles it took, when it was
//! created and first scheduled, and the time between (its time to placement).

use std::fmt::Write as _;

use gantry_sim::GroupRecord;

use super::page::{duration, esc};
use super::plots::thousands;

pub fn section(html: &mut String, groups: &[GroupRecord]) -> std::fmt::Result {
    let scheduled = groups
        .iter()
        .filter(|g| g.condition.as_ref().is_some_and(|c| c.status == "True"))
        .count();
    write!(
        html,
        "<section id=\"pod-groups\"><h2>Pod groups</h2>\
<p class=\"hint\">{} of {} PodGroups scheduled. A group is tried in pod-group cycles: all its \
pending members at once, bound together only if a gang's <code>minCount</code> fit. A group \
without a condition never had its members tried (fewer than <code>minCount</code> exist).</p>\
{}\
<table><thead><tr><th>PodGroup</th><th>PodGroupScheduled</th><th>message</th>\
<th class=\"num\">cycles</th><th class=\"num\">created at</th>\
<th class=\"num\">scheduled at</th><th class=\"num\">time to placement</th></tr></thead><tbody>",
        thousands(scheduled as i64),
        thousands(groups.len() as i64),
        waits(groups),
    )?;
    for group in groups {
        let (status, message) = match &group.condition {
            Some(c) => (format!("{} ({})", c.status, c.reason), c.message.as_str()),
            None => ("none".to_string(), ""),
        };
        let at = group.scheduled_at.map(duration).unwrap_or_default();
        let waited = group.time_to_placement().map(duration).unwrap_or_default();
        write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{at}</td><td class=\"num\">{waited}</td></tr>",
            esc(&group.group),
            esc(&status),
            esc(message),
            thousands(i64::from(group.cycles)),
            duration(group.created_at),
        )?;
    }
    html.push_str("</tbody></table></section>\n");
    Ok(())
}

/// The scheduled groups' time from creation to placement, as a sentence (empty when none
/// was scheduled).
fn waits(groups: &[GroupRecord]) -> String {
    let mut waits: Vec<_> = groups
        .iter()
        .filter_map(GroupRecord::time_to_placement)
        .collect();
    if waits.is_empty() {
        return String::new();
    }
    waits.sort_unstable();
    let median = waits[(waits.len() - 1) / 2];
    let longest = waits[waits.len() - 1];
    format!(
        "<p>Time from a PodGroup's creation to its placement: median {}, longest {}.</p>",
        duration(median),
        duration(longest)
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn group(created: u64, scheduled: Option<u64>) -> GroupRecord {
        GroupRecord {
            group: "default/g".into(),
            condition: None,
            cycles: 1,
            created_at: Duration::from_secs(created),
            scheduled_at: scheduled.map(Duration::from_secs),
        }
    }

    #[test]
    fn the_time_to_placement_counts_from_creation_and_skips_groups_never_placed() {
        assert_eq!(waits(&[group(0, None)]), "");
        let summary = waits(&[
            group(10, Some(12)),
            group(0, Some(30)),
            group(5, None),
            group(1, Some(5)),
        ]);
        // 2 s, 4 s and 30 s: the median is 4 s.
        assert_eq!(
            summary,
            format!(
                "<p>Time from a PodGroup's creation to its placement: median {}, longest {}.</p>",
                duration(Duration::from_secs(4)),
                duration(Duration::from_secs(30))
            )
        );
        let mut html = String::new();
        section(&mut html, &[group(10, Some(12))]).unwrap();
        assert!(html.contains("time to placement"), "{html}");
        assert!(
            html.contains(&format!(
                "<td class=\"num\">{}</td></tr>",
                duration(Duration::from_secs(2))
            )),
            "{html}"
        );
    }
}
