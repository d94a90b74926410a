//! Shell quoting, so that `sbx sandbox exec NAME -- cmd args…` reaches `/bin/sh -c` intact.

/// Quotes a word for a POSIX shell; plain words stay as they are.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Joins words into one shell command line.
pub fn join(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("uname"), "uname");
        assert_eq!(quote("-a"), "-a");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(join(&["echo".into(), "a b".into()]), "echo 'a b'");
    }
}
