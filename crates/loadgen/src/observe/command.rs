//! The command as reports show it: its words joined by spaces (quoted
//! when they hold one), passwords hidden, since the command ends up in the
//! JSON run and the HTML page.

/// The command as the report shows it: words joined by spaces (quoted when
/// they hold one), with passwords hidden (`--mysql-password=***`, the word
/// after `--pgsql-password`, `password=***` in a connection string,
/// `user:***@` in a URL).
pub fn shown(command: &[String]) -> String {
    let mut out = Vec::with_capacity(command.len());
    let mut hide_next = false;
    for word in command {
        let shown = if hide_next {
            "***".to_owned()
        } else {
            hide_password(word)
        };
        hide_next = word.starts_with("--") && word.ends_with("password");
        out.push(if shown.contains(char::is_whitespace) {
            format!("'{shown}'")
        } else {
            shown
        });
    }
    out.join(" ")
}

fn hide_password(word: &str) -> String {
    if word.starts_with("--")
        && let Some((key, _)) = word.split_once('=')
        && key.ends_with("password")
    {
        return format!("{key}=***");
    }
    // `scheme://user:secret@host`.
    if let Some(scheme_end) = word.find("://") {
        let rest = &word[scheme_end + 3..];
        if let Some(at) = rest.find('@')
            && let Some(colon) = rest[..at].find(':')
        {
            let start = scheme_end + 3 + colon + 1;
            return format!("{}***{}", &word[..start], &word[scheme_end + 3 + at..]);
        }
    }
    // libpq `key=value` pairs.
    if word.contains("password=") {
        return word
            .split(' ')
            .map(|pair| {
                if pair.starts_with("password=") {
                    "password=***"
                } else {
                    pair
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    }
    word.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_the_command_are_hidden() {
        let words: Vec<String> = [
            "sysbench",
            "--mysql-password=s3cret",
            "--pgsql-password",
            "s3cret",
            "host=h password=s3cret dbname=d",
            "postgres://u:s3cret@h/db",
            "--mysql-user=root",
        ]
        .map(str::to_owned)
        .to_vec();
        let shown = shown(&words);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            shown,
            "sysbench --mysql-password=*** --pgsql-password *** 'host=h password=*** dbname=d' \
             postgres://u:***@h/db --mysql-user=root"
        );
    }
}
