"""The transformers' layer lists: BERT-base (Devlin et al. 2019: L=12, H=768, A=12) as an
encoder over 128 tokens with its pooler, and a GPT-style language model, GPT-3 Small (Brown
et al. 2020, Table 2.1: 12 layers, d_model 768, 12 heads, 2,048-token context), whose output
layer shares the token embedding's weights."""

from __future__ import annotations

from simdist.models.builder import TransformerNet

BERT_VOCAB, BERT_POSITIONS, BERT_TYPES = 30522, 512, 2
GPT_VOCAB = 50257  # GPT-2's byte-pair vocabulary, which GPT-3 reuses
TOKEN_ID_BYTES = 4  # int32 ids


def bert(layers: int = 12, d: int = 768, heads: int = 12, tokens: int = 128) -> TransformerNet:
    """BERT's encoder (post-norm blocks) as a fine-tuning step reads it: word, position and
    segment embeddings, the blocks, and the pooler's dense layer on the first token."""
    net = TransformerNet(tokens, d, heads)
    net.embedding("word_embeddings", BERT_VOCAB, add=False)
    net.embedding("position_embeddings", BERT_POSITIONS)
    net.embedding("token_type_embeddings", BERT_TYPES)
    net.layer_norm("embeddings_ln")
    for i in range(layers):
        net.block(f"layer_{i}", pre_norm=False)
    return net.dense("pooler", d, tokens=1)


def gpt(layers: int = 12, d: int = 768, heads: int = 12, tokens: int = 2048) -> TransformerNet:
    """A decoder-only language model (pre-norm blocks, GPT-2/GPT-3): token and position
    embeddings, the blocks, a final layer norm and the logits over the vocabulary through the
    token embedding's weights (no parameters of its own)."""
    net = TransformerNet(tokens, d, heads)
    net.embedding("wte", GPT_VOCAB, add=False)
    net.embedding("wpe", tokens)
    for i in range(layers):
        net.block(f"h_{i}", pre_norm=True)
    net.layer_norm("ln_f")
    net.dense("lm_head", GPT_VOCAB, bias=False)
    return _tied(net)


def _tied(net: TransformerNet) -> TransformerNet:
    """The last layer reuses the token embedding: its FLOPs and logits, no new weights."""
    head = net.layers[-1]
    net.layers[-1] = type(head)(head.name, head.kind, 0, head.flops, head.activation_bytes)
    return net
