//! RFC 8439's plaintexts, as its vectors use them.

/// Section 2.4.2's (and 2.8.2's) plaintext.
pub(crate) const SUNSCREEN: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer \
    you only one tip for the future, sunscreen would be it.";

/// A.2 vector 2's plaintext and A.3 vectors 2 and 3's message.
pub(crate) const IETF_SUBMISSION: &[u8] = b"Any submission to the IETF intended by the \
    Contributor for publication as all or part of an IETF Internet-Draft or RFC and any \
    statement made within the context of an IETF activity is considered an \"IETF \
    Contribution\". Such statements include oral statements in IETF sessions, as well as \
    written and electronic communications made at any time or place, which are addressed to";

/// A.2 vector 3's plaintext and A.3 vector 4's message.
pub(crate) const JABBERWOCKY: &[u8] = b"'Twas brillig, and the slithy toves\n\
    Did gyre and gimble in the wabe:\nAll mimsy were the borogoves,\n\
    And the mome raths outgrabe.";
