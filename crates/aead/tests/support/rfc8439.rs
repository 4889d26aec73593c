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

/// A.2 vector 2's ciphertext (key `00…01`, nonce `00…02`, counter 1), in hex.
pub(crate) const IETF_SUBMISSION_CIPHERTEXT: &str = "a3fbf07df3fa2fde4f376ca23e82737041605d9f4f4f57bd8cff2c1d4b7955ec\
    2a97948bd3722915c8f3d337f7d370050e9e96d647b7c39f56e031ca5eb6250d\
    4042e02785ececfa4b4bb5e8ead0440e20b6e8db09d881a7c6132f420e527950\
    42bdfa7773d8a9051447b3291ce1411c680465552aa6c405b7764d5e87bea85a\
    d00f8449ed8f72d0d662ab052691ca66424bc86d2df80ea41f43abf937d3259d\
    c4b2d0dfb48a6c9139ddd7f76966e928e635553ba76c5c879d7b35d49eb2e62b\
    0871cdac638939e25e8a1e0ef9d5280fa8ca328b351c3c765989cbcf3daa8b6c\
    cc3aaf9f3979c92b3720fc88dc95ed84a1be059c6499b9fda236e7e818b04b0b\
    c39c1e876b193bfe5569753f88128cc08aaa9b63d1a16f80ef2554d7189c411f\
    5869ca52c5b83fa36ff216b9c1d30062bebcfd2dc5bce0911934fda79a86f6e6\
    98ced759c3ff9b6477338f3da4f9cd8514ea9982ccafb341b2384dd902f3d1ab\
    7ac61dd29c6f21ba5b862f3730e37cfdc4fd806c22f221";
