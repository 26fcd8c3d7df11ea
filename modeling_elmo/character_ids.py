"""Character ids of the original ELMo vocabulary, shifted by +1 so that 0 is padding.

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


def _wrap(char_ids: list[int], max_characters_per_token: int) -> list[int]:
    ids = [BEGIN_OF_WORD_CHAR, *char_ids, END_OF_WORD_CHAR]
    return ids + [PADDING_CHAR] * (max_characters_per_token - len(ids))


def word_to_char_ids(word: str, max_characters_per_token: int = 50) -> list[int]:
    """Map one word to its `max_characters_per_token` character ids, exactly like the original vocabulary.

    Long words are cut at `max_characters_per_token - 2` bytes, even inside a multi-byte character. The literal
    strings `<S>` and `</S>` map to the sentence boundary words, as in the original.
    """
    if word == BOS_TOKEN:
        return _wrap([BEGIN_OF_SENTENCE_CHAR], max_characters_per_token)
    if word == EOS_TOKEN:
        return _wrap([END_OF_SENTENCE_CHAR], max_characters_per_token)
    data = word.encode("utf-8", errors="ignore")[: max_characters_per_token - 2]  # as the original
    return _wrap([b + 1 for b in data], max_characters_per_token)


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
