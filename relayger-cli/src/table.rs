//! Lists as aligned tables with a header row (`runtimes list`, `rooms list`,
//! …): columns separated by spaces, no borders and no colours, so the text
//! reads the same on a terminal, in a pipe and in a log. On a terminal the
//! table fits its width (long cells wrap); piped, lines are never wrapped.
//! Cells hold text that went through [`crate::human::clean`] where it came
//! from another identity.

use std::io::IsTerminal;

use comfy_table::{ContentArrangement, Table, presets};

/// Space between two columns.
const GAP: u16 = 2;

/// `rows` under `headers`, or `empty` when there are none.
pub(crate) fn table(headers: &[&str], rows: Vec<Vec<String>>, empty: &str) -> String {
    if rows.is_empty() {
        return empty.to_owned();
    }
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    if std::io::stdout().is_terminal() {
        table.set_content_arrangement(ContentArrangement::Dynamic);
    } else {
        table.force_no_tty();
        table.set_content_arrangement(ContentArrangement::Disabled);
    }
    table.set_header(headers.iter().copied());
    table.add_rows(rows);
    for column in table.column_iter_mut() {
        column.set_padding((0, GAP));
    }
    table
        .lines()
        .map(|line| line.trim_end().to_owned())
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_under_their_headers() {
        let text = table(
            &["ID", "NAME", "LAST"],
            vec![
                vec!["a1".into(), "release".into(), "#3".into()],
                vec!["b22222".into(), "x".into(), "#10".into()],
            ],
            "none",
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("ID"), "{text}");
        let name_at = lines[0].find("NAME").expect("NAME");
        assert_eq!(lines[1].find("release"), Some(name_at), "{text}");
        assert_eq!(lines[2].find('x'), Some(name_at), "{text}");
        assert!(lines.iter().all(|line| line == &line.trim_end()), "{text}");
        assert_eq!(table(&["ID"], Vec::new(), "none"), "none");
    }
}
