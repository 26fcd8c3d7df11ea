"""Character ids of the original ELMo vocabulary, shifted by +1 so that 0 is padding: what the tokenizer, the model's
sentence boundaries, the token-embedding tables and the pretraining batches all encode words with.

A word is its UTF-8 bytes (byte value b -> id b + 1), truncated to `max_characters_per_token - 2` bytes and wrapped
in begin-of-word / end-of-word markers, then padded with the character-padding id. The sentence boundary words `<S>`
and `</S>` are made of one special character each. A padded *word* (beyond the end of a sentence) is all zeros.
"""

BEGIN_OF_SENTENCE_CHAR = 256 + 1
END_OF_SENTENCE_CHAR = 257 + 1
BEGIN_OF_WORD_CHAR = 258 + 1
END_OF_WORD_CHAR = 259 + 1
PADDING_CHAR = 260 + 1

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def char_row(char_ids: list[int], max_characters_per_token: int) -> list[int]:
    """The row of a word made of `char_ids`: begin-of-word, `char_ids`, end-of-word, then character padding."""
    ids = [BEGIN_OF_WORD_CHAR, *char_ids, END_OF_WORD_CHAR]
    return ids + [PADDING_CHAR] * (max_characters_per_token - len(ids))


def byte_char_ids(word: str, max_characters_per_token: int = 50) -> list[int]:
    """The `max_characters_per_token` character ids of `word` read as UTF-8 bytes, whatever it is (`<S>` and `</S>`
    included), cut at `max_characters_per_token - 2` bytes, even inside a multi-byte character (as the original)."""
    data = word.encode("utf-8", errors="ignore")[: max_characters_per_token - 2]
    return char_row([b + 1 for b in data], max_characters_per_token)


def word_to_char_ids(word: str, max_characters_per_token: int = 50) -> list[int]:
    """Map one word to its `max_characters_per_token` character ids, exactly like the original vocabulary: its bytes
    (`byte_char_ids`), except that the literal strings `<S>` and `</S>` map to the sentence boundary words."""
    if word == BOS_TOKEN:
        return char_row([BEGIN_OF_SENTENCE_CHAR], max_characters_per_token)
    if word == EOS_TOKEN:
        return char_row([END_OF_SENTENCE_CHAR], max_characters_per_token)
    return byte_char_ids(word, max_characters_per_token)


# Every character id as a token, for the tokenizer's generic machinery (`get_vocab()`, `convert_ids_to_tokens()`):
# `<pad>` = 0, bytes `<0x00>`..`<0xFF>` = 1..256, `<S>` = 257, `</S>` = 258, `<bow>` = 259, `<eow>` = 260,
# `<char_pad>` = 261.
PAD_TOKEN, BOW_TOKEN, EOW_TOKEN, CHAR_PAD_TOKEN = "<pad>", "<bow>", "<eow>", "<char_pad>"
BYTE_TOKENS = {f"<0x{byte:02X}>": bytes([byte]) for byte in range(256)}  # byte b has id b + 1
CHAR_VOCAB = {
    PAD_TOKEN: 0,
    **{token: byte + 1 for byte, token in enumerate(BYTE_TOKENS)},
    BOS_TOKEN: BEGIN_OF_SENTENCE_CHAR,
    EOS_TOKEN: END_OF_SENTENCE_CHAR,
    BOW_TOKEN: BEGIN_OF_WORD_CHAR,
    EOW_TOKEN: END_OF_WORD_CHAR,
    CHAR_PAD_TOKEN: PADDING_CHAR,
}


# ---- character lexicons (ELMoForManyLangs): learned Unicode characters instead of bytes ----------------------------
LEXICON_CHAR_SPECIALS = ("<bow>", "<eow>", "<bos>", "<eos>", "<oov>", "<pad>")
LEXICON_WORD_SPECIALS = ("<oov>", "<pad>")
LEXICON_SENTENCE_BOUNDARIES = ("<bos>", "<eos>")


class CharacterLexicon:
    """
    Input ids from a character lexicon and an optional word lexicon (tokens in id order, as ELMoForManyLangs'
    `char.dic` / `word.dic`), every id shifted by +1 so that 0 stays padding.

    A word is cut to `max_characters_per_token - 2` characters (code points; no case folding); its row is
    `[<eow>, c1 .. cn, <bow>, <pad> ...]` (ELMoForManyLangs fetches the two word markers crossed, and so does this),
    an unknown character is `<oov>`, and the words `<bos>` / `<eos>` are the sentence boundary characters. With a word
    lexicon the row ends with the (cut) word's id, `<oov>` when unknown.
    """

    def __init__(self, chars: list[str], words: list[str] | None, max_characters_per_token: int):
        for name, tokens, specials in (
            ("char_lexicon", chars, LEXICON_CHAR_SPECIALS),
            ("word_lexicon", words, LEXICON_WORD_SPECIALS),
        ):
            if tokens is None:
                continue
            if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
                raise TypeError(f"`{name}` must be a list of str (the tokens in id order).")
            if len(set(tokens)) != len(tokens):
                raise ValueError(f"`{name}` holds a token twice.")
            if missing := [token for token in specials if token not in tokens]:
                raise ValueError(f"`{name}` lacks {missing[0]!r} (needed: {', '.join(specials)}).")
        self.char_ids = {token: index + 1 for index, token in enumerate(chars)}
        self.word_ids = None if words is None else {token: index + 1 for index, token in enumerate(words)}
        self.max_characters_per_token = max_characters_per_token

    def row(self, word: str) -> list[int]:
        """The input ids of one word: `max_characters_per_token` character ids, then the word id (word lexicon)."""
        ids = self.char_ids
        if word in LEXICON_SENTENCE_BOUNDARIES:
            chars = [ids[word]]
        else:
            word = word[: self.max_characters_per_token - 2]
            chars = [ids.get(char, ids["<oov>"]) for char in word]
        row = [ids["<eow>"], *chars, ids["<bow>"]]
        row += [ids["<pad>"]] * (self.max_characters_per_token - len(row))
        if self.word_ids is not None:
            row.append(self.word_ids.get(word, self.word_ids["<oov>"]))
        return row

    def vocab(self) -> dict[str, int]:
        """Every character id as a token: the lexicon's, with its `<pad>` named `<char_pad>` as in `CHAR_VOCAB` (the
        tokenizer's `<pad>` is id 0, the padding word)."""
        renamed = {"<pad>": CHAR_PAD_TOKEN}
        return {PAD_TOKEN: 0, **{renamed.get(token, token): index for token, index in self.char_ids.items()}}
