//! The report's PodGroup section (GangScheduling on): each group's `PodGroupScheduled`
//! condition as the scheduler would write it, the pod-group cycles it took, and when it was
//! first scheduled.

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
<table><thead><tr><th>PodGroup</th><th>PodGroupScheduled</th><th>message</th>\
<th class=\"num\">cycles</th><th class=\"num\">scheduled at</th></tr></thead><tbody>",
        thousands(scheduled as i64),
        thousands(groups.len() as i64)
    )?;
    for group in groups {
        let (status, message) = match &group.condition {
            Some(c) => (format!("{} ({})", c.status, c.reason), c.message.as_str()),
            None => ("none".to_string(), ""),
        };
        let at = group.scheduled_at.map(duration).unwrap_or_default();
        write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{at}</td></tr>",
            esc(&group.group),
            esc(&status),
            esc(message),
            thousands(i64::from(group.cycles)),
        )?;
    }
    html.push_str("</tbody></table></section>\n");
    Ok(())
}
