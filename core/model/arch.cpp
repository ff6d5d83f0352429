// The architecture table: per family, what the forward does differently (arch_info) and each logical tensor's
// HF and GGUF name (tensor_names). Adding a family is adding a row here and, when it computes something new,
// a case in the forward.
#include "model/arch.h"

#include <deque>

#include "util/error.h"

namespace gb {

namespace {

const char* const id_names[T_COUNT] = {
    "token embedding", "position embedding", "final norm", "final norm bias", "lm_head", "attn norm",
    "attn norm bias",  "attn_q",             "attn_k",     "attn_v",          "attn_qkv", "attn_q bias",
    "attn_k bias",     "attn_v bias",        "attn_qkv bias", "attn_output",  "attn_output bias", "q_norm",
    "k_norm",          "attn post norm",     "ffn norm",   "ffn norm bias",   "ffn_gate", "ffn_up",
    "ffn_gate_up",     "ffn_up bias",        "ffn_down",   "ffn_down bias",   "ffn post norm", "router",
    "expert gate",     "expert up",          "expert down", "shared expert gate", "shared expert up",
    "shared expert down", "shared expert router", "token type embedding", "embedding norm", "embedding norm bias",
    "mlm head dense", "mlm head dense bias", "mlm decoder bias", "cls token", "distillation token",
    "patch embedding", "patch embedding bias", "distillation classifier", "distillation classifier bias",
    "token embedding (stack's copy)", "cross-attn q", "cross-attn k", "cross-attn v", "cross-attn output",
    "cross-attn q bias", "cross-attn k bias", "cross-attn v bias", "cross-attn output bias", "cross-attn norm",
    "cross-attn norm bias"};

using names = std::initializer_list<std::pair<tensor_id, const char*>>;

tensor_names make(const char* gguf_arch, const tensor_names* base, names hf, names gguf) {
    tensor_names t = base ? *base : tensor_names{};
    t.gguf_arch = gguf_arch;
    for (auto [id, n] : hf) t.hf[id] = n;
    for (auto [id, n] : gguf) t.gguf[id] = n;
    return t;
}

// llama.cpp's GGUF names, shared by every family but GPT-2's learned positions
const names gguf_common = {
    {T_TOK_EMB, "token_embd.weight"},        {T_NORM_F, "output_norm.weight"},
    {T_LM_HEAD, "output.weight"},            {T_ATTN_NORM, "blk.{l}.attn_norm.weight"},
    {T_Q, "blk.{l}.attn_q.weight"},          {T_K, "blk.{l}.attn_k.weight"},
    {T_V, "blk.{l}.attn_v.weight"},          {T_Q_B, "blk.{l}.attn_q.bias"},
    {T_K_B, "blk.{l}.attn_k.bias"},          {T_V_B, "blk.{l}.attn_v.bias"},
    {T_O, "blk.{l}.attn_output.weight"},     {T_FFN_NORM, "blk.{l}.ffn_norm.weight"},
    {T_GATE, "blk.{l}.ffn_gate.weight"},     {T_UP, "blk.{l}.ffn_up.weight"},
    {T_DOWN, "blk.{l}.ffn_down.weight"},     {T_Q_NORM, "blk.{l}.attn_q_norm.weight"},
    {T_K_NORM, "blk.{l}.attn_k_norm.weight"}, {T_ATTN_POST_NORM, "blk.{l}.post_attention_norm.weight"},
    {T_FFN_POST_NORM, "blk.{l}.post_ffw_norm.weight"}};
const names gguf_experts = {{T_ROUTER, "blk.{l}.ffn_gate_inp.weight"},  {T_EXP_GATE, "blk.{l}.ffn_gate_exps.weight"},
                            {T_EXP_UP, "blk.{l}.ffn_up_exps.weight"},    {T_EXP_DOWN, "blk.{l}.ffn_down_exps.weight"},
                            {T_SH_GATE, "blk.{l}.ffn_gate_shexp.weight"}, {T_SH_UP, "blk.{l}.ffn_up_shexp.weight"},
                            {T_SH_DOWN, "blk.{l}.ffn_down_shexp.weight"}, {T_SH_ROUTER, "blk.{l}.ffn_gate_inp_shexp.weight"}};

// HF Llama-style names (LlamaForCausalLM and the families derived from it)
const names hf_llama = {
    {T_TOK_EMB, "model.embed_tokens.weight"},
    {T_NORM_F, "model.norm.weight"},
    {T_LM_HEAD, "lm_head.weight"},
    {T_ATTN_NORM, "model.layers.{l}.input_layernorm.weight"},
    {T_Q, "model.layers.{l}.self_attn.q_proj.weight"},
    {T_K, "model.layers.{l}.self_attn.k_proj.weight"},
    {T_V, "model.layers.{l}.self_attn.v_proj.weight"},
    {T_Q_B, "model.layers.{l}.self_attn.q_proj.bias"},
    {T_K_B, "model.layers.{l}.self_attn.k_proj.bias"},
    {T_V_B, "model.layers.{l}.self_attn.v_proj.bias"},
    {T_O, "model.layers.{l}.self_attn.o_proj.weight"},
    {T_FFN_NORM, "model.layers.{l}.post_attention_layernorm.weight"},
    {T_GATE, "model.layers.{l}.mlp.gate_proj.weight"},
    {T_UP, "model.layers.{l}.mlp.up_proj.weight"},
    {T_DOWN, "model.layers.{l}.mlp.down_proj.weight"},
    {T_Q_NORM, "model.layers.{l}.self_attn.q_norm.weight"},
    {T_K_NORM, "model.layers.{l}.self_attn.k_norm.weight"}};
// Qwen2-MoE, Qwen3-MoE and OLMoE name their experts alike
const names hf_qwen_experts = {{T_ROUTER, "model.layers.{l}.mlp.gate.weight"},
                               {T_EXP_GATE, "model.layers.{l}.mlp.experts.{e}.gate_proj.weight"},
                               {T_EXP_UP, "model.layers.{l}.mlp.experts.{e}.up_proj.weight"},
                               {T_EXP_DOWN, "model.layers.{l}.mlp.experts.{e}.down_proj.weight"},
                               {T_SH_GATE, "model.layers.{l}.mlp.shared_expert.gate_proj.weight"},
                               {T_SH_UP, "model.layers.{l}.mlp.shared_expert.up_proj.weight"},
                               {T_SH_DOWN, "model.layers.{l}.mlp.shared_expert.down_proj.weight"},
                               {T_SH_ROUTER, "model.layers.{l}.mlp.shared_expert_gate.weight"}};

// A name made at start-up, kept for the program's life: the table holds const char*, and a deque never moves
// its strings
const char* kept_name(const std::string& n) {
    static std::deque<std::string> keep;
    return keep.emplace_back(n).c_str();
}

// BERT-style encoder layers (BERT and RoBERTa share them under their own prefix): Post-LN, so HF's
// attention.output.LayerNorm is the norm after attention's residual add and output.LayerNorm the one after the MLP's
void add_bert_body(tensor_names& t, const std::string& p) {
    auto s = [&](const std::string& n) { return kept_name(p + n); };
    const std::pair<tensor_id, const char*> body[] = {{T_TOK_EMB, s("embeddings.word_embeddings.weight")},
            {T_POS_EMB, s("embeddings.position_embeddings.weight")},
            {T_TYPE_EMB, s("embeddings.token_type_embeddings.weight")},
            {T_EMB_NORM, s("embeddings.LayerNorm.weight")},
            {T_EMB_NORM_B, s("embeddings.LayerNorm.bias")},
            {T_Q, s("encoder.layer.{l}.attention.self.query.weight")},
            {T_Q_B, s("encoder.layer.{l}.attention.self.query.bias")},
            {T_K, s("encoder.layer.{l}.attention.self.key.weight")},
            {T_K_B, s("encoder.layer.{l}.attention.self.key.bias")},
            {T_V, s("encoder.layer.{l}.attention.self.value.weight")},
            {T_V_B, s("encoder.layer.{l}.attention.self.value.bias")},
            {T_O, s("encoder.layer.{l}.attention.output.dense.weight")},
            {T_O_B, s("encoder.layer.{l}.attention.output.dense.bias")},
            {T_ATTN_NORM, s("encoder.layer.{l}.attention.output.LayerNorm.weight")},
            {T_ATTN_NORM_B, s("encoder.layer.{l}.attention.output.LayerNorm.bias")},
            {T_UP, s("encoder.layer.{l}.intermediate.dense.weight")},
            {T_UP_B, s("encoder.layer.{l}.intermediate.dense.bias")},
            {T_DOWN, s("encoder.layer.{l}.output.dense.weight")},
            {T_DOWN_B, s("encoder.layer.{l}.output.dense.bias")},
            {T_FFN_NORM, s("encoder.layer.{l}.output.LayerNorm.weight")},
            {T_FFN_NORM_B, s("encoder.layer.{l}.output.LayerNorm.bias")}};
    for (auto [id, n] : body) t.hf[id] = n;
}

// ViT-style image classifier layers under a prefix ("vit.", "deit."): pre-norm blocks (layernorm_before feeds
// attention, layernorm_after the MLP), the final layernorm, then a classifier read at [CLS]
void add_vit_body(tensor_names& t, const std::string& p) {
    auto s = [&](const std::string& n) { return kept_name(p + n); };
    const std::pair<tensor_id, const char*> body[] = {{T_CLS_TOK, s("embeddings.cls_token")},
            {T_POS_EMB, s("embeddings.position_embeddings")},
            {T_PATCH, s("embeddings.patch_embeddings.projection.weight")},
            {T_PATCH_B, s("embeddings.patch_embeddings.projection.bias")},
            {T_ATTN_NORM, s("encoder.layer.{l}.layernorm_before.weight")},
            {T_ATTN_NORM_B, s("encoder.layer.{l}.layernorm_before.bias")},
            {T_Q, s("encoder.layer.{l}.attention.attention.query.weight")},
            {T_Q_B, s("encoder.layer.{l}.attention.attention.query.bias")},
            {T_K, s("encoder.layer.{l}.attention.attention.key.weight")},
            {T_K_B, s("encoder.layer.{l}.attention.attention.key.bias")},
            {T_V, s("encoder.layer.{l}.attention.attention.value.weight")},
            {T_V_B, s("encoder.layer.{l}.attention.attention.value.bias")},
            {T_O, s("encoder.layer.{l}.attention.output.dense.weight")},
            {T_O_B, s("encoder.layer.{l}.attention.output.dense.bias")},
            {T_FFN_NORM, s("encoder.layer.{l}.layernorm_after.weight")},
            {T_FFN_NORM_B, s("encoder.layer.{l}.layernorm_after.bias")},
            {T_UP, s("encoder.layer.{l}.intermediate.dense.weight")},
            {T_UP_B, s("encoder.layer.{l}.intermediate.dense.bias")},
            {T_DOWN, s("encoder.layer.{l}.output.dense.weight")},
            {T_DOWN_B, s("encoder.layer.{l}.output.dense.bias")},
            {T_NORM_F, s("layernorm.weight")},
            {T_NORM_F_B, s("layernorm.bias")}};
    for (auto [id, n] : body) t.hf[id] = n;
}

// One stack of a BART-style encoder–decoder ("encoder" or "decoder"; BART, mBART and Marian name them alike):
// the tied token embedding is model.shared (older files also, or only, keep the stack's embed_tokens), the
// decoder's layers add encoder_attn, mBART's stacks end in layer_norm, and the LM head's bias is
// final_logits_bias. self_attn_layer_norm / final_layer_norm are norm1 / norm2 whether they come after the
// residual add (BART, Marian: Post-LN) or before the sublayer (mBART: Pre-LN).
void add_seq2seq_body(tensor_names& t, const std::string& stack, bool final_norm) {
    const std::string p = "model." + stack + ".", l = p + "layers.{l}.";
    auto s = [&](const std::string& n) { return kept_name(n); };
    const std::pair<tensor_id, const char*> body[] = {{T_TOK_EMB, "model.shared.weight"},
            {T_TOK_EMB_ALT, s(p + "embed_tokens.weight")},
            {T_POS_EMB, s(p + "embed_positions.weight")},
            {T_EMB_NORM, s(p + "layernorm_embedding.weight")},
            {T_EMB_NORM_B, s(p + "layernorm_embedding.bias")},
            {T_ATTN_NORM, s(l + "self_attn_layer_norm.weight")},
            {T_ATTN_NORM_B, s(l + "self_attn_layer_norm.bias")},
            {T_Q, s(l + "self_attn.q_proj.weight")}, {T_Q_B, s(l + "self_attn.q_proj.bias")},
            {T_K, s(l + "self_attn.k_proj.weight")}, {T_K_B, s(l + "self_attn.k_proj.bias")},
            {T_V, s(l + "self_attn.v_proj.weight")}, {T_V_B, s(l + "self_attn.v_proj.bias")},
            {T_O, s(l + "self_attn.out_proj.weight")}, {T_O_B, s(l + "self_attn.out_proj.bias")},
            {T_FFN_NORM, s(l + "final_layer_norm.weight")},
            {T_FFN_NORM_B, s(l + "final_layer_norm.bias")},
            {T_UP, s(l + "fc1.weight")}, {T_UP_B, s(l + "fc1.bias")},
            {T_DOWN, s(l + "fc2.weight")}, {T_DOWN_B, s(l + "fc2.bias")}};
    for (auto [id, n] : body) t.hf[id] = n;
    if (final_norm) t.hf[T_NORM_F] = s(p + "layer_norm.weight"), t.hf[T_NORM_F_B] = s(p + "layer_norm.bias");
    if (stack != "decoder") return;
    const std::pair<tensor_id, const char*> cross[] = {{T_XNORM, s(l + "encoder_attn_layer_norm.weight")},
            {T_XNORM_B, s(l + "encoder_attn_layer_norm.bias")},
            {T_XQ, s(l + "encoder_attn.q_proj.weight")}, {T_XQ_B, s(l + "encoder_attn.q_proj.bias")},
            {T_XK, s(l + "encoder_attn.k_proj.weight")}, {T_XK_B, s(l + "encoder_attn.k_proj.bias")},
            {T_XV, s(l + "encoder_attn.v_proj.weight")}, {T_XV_B, s(l + "encoder_attn.v_proj.bias")},
            {T_XO, s(l + "encoder_attn.out_proj.weight")}, {T_XO_B, s(l + "encoder_attn.out_proj.bias")},
            {T_LM_HEAD, "lm_head.weight"}, {T_LM_HEAD_B, "final_logits_bias"}};
    for (auto [id, n] : cross) t.hf[id] = n;
}

struct family_names {
    tensor_names gpt2, llama, neox, gemma, gemma2, phi3, olmo2, qwen3, mixtral, qwen2_moe, qwen3_moe, olmoe, bert,
        roberta, distilbert, vit, deit, bart, mbart, marian, bart_enc, mbart_enc, marian_enc;
    family_names();
};

// GPT-2 (Conv1D matrices, learned positions) and GPT-NeoX, its names over GPT-2's GGUF ones (fused q k v per head)
void gpt_rows(family_names& f) {
    f.gpt2 = make("gpt2", nullptr,
                  {{T_TOK_EMB, "wte.weight"},
                   {T_POS_EMB, "wpe.weight"},
                   {T_NORM_F, "ln_f.weight"},
                   {T_NORM_F_B, "ln_f.bias"},
                   {T_LM_HEAD, "lm_head.weight"},
                   {T_ATTN_NORM, "h.{l}.ln_1.weight"},
                   {T_ATTN_NORM_B, "h.{l}.ln_1.bias"},
                   {T_QKV, "h.{l}.attn.c_attn.weight"},
                   {T_QKV_B, "h.{l}.attn.c_attn.bias"},
                   {T_O, "h.{l}.attn.c_proj.weight"},
                   {T_O_B, "h.{l}.attn.c_proj.bias"},
                   {T_FFN_NORM, "h.{l}.ln_2.weight"},
                   {T_FFN_NORM_B, "h.{l}.ln_2.bias"},
                   {T_UP, "h.{l}.mlp.c_fc.weight"},
                   {T_UP_B, "h.{l}.mlp.c_fc.bias"},
                   {T_DOWN, "h.{l}.mlp.c_proj.weight"},
                   {T_DOWN_B, "h.{l}.mlp.c_proj.bias"}},
                  {{T_TOK_EMB, "token_embd.weight"},
                   {T_POS_EMB, "position_embd.weight"},
                   {T_NORM_F, "output_norm.weight"},
                   {T_NORM_F_B, "output_norm.bias"},
                   {T_LM_HEAD, "output.weight"},
                   {T_ATTN_NORM, "blk.{l}.attn_norm.weight"},
                   {T_ATTN_NORM_B, "blk.{l}.attn_norm.bias"},
                   {T_QKV, "blk.{l}.attn_qkv.weight"},
                   {T_QKV_B, "blk.{l}.attn_qkv.bias"},
                   {T_O, "blk.{l}.attn_output.weight"},
                   {T_O_B, "blk.{l}.attn_output.bias"},
                   {T_FFN_NORM, "blk.{l}.ffn_norm.weight"},
                   {T_FFN_NORM_B, "blk.{l}.ffn_norm.bias"},
                   {T_UP, "blk.{l}.ffn_up.weight"},
                   {T_UP_B, "blk.{l}.ffn_up.bias"},
                   {T_DOWN, "blk.{l}.ffn_down.weight"},
                   {T_DOWN_B, "blk.{l}.ffn_down.bias"}});
    f.gpt2.hf_conv1d = true;
    f.neox = make("gptneox", &f.gpt2,
                  {{T_TOK_EMB, "gpt_neox.embed_in.weight"},
                   {T_NORM_F, "gpt_neox.final_layer_norm.weight"},
                   {T_NORM_F_B, "gpt_neox.final_layer_norm.bias"},
                   {T_LM_HEAD, "embed_out.weight"},
                   {T_ATTN_NORM, "gpt_neox.layers.{l}.input_layernorm.weight"},
                   {T_ATTN_NORM_B, "gpt_neox.layers.{l}.input_layernorm.bias"},
                   {T_QKV, "gpt_neox.layers.{l}.attention.query_key_value.weight"},
                   {T_QKV_B, "gpt_neox.layers.{l}.attention.query_key_value.bias"},
                   {T_O, "gpt_neox.layers.{l}.attention.dense.weight"},
                   {T_O_B, "gpt_neox.layers.{l}.attention.dense.bias"},
                   {T_FFN_NORM, "gpt_neox.layers.{l}.post_attention_layernorm.weight"},
                   {T_FFN_NORM_B, "gpt_neox.layers.{l}.post_attention_layernorm.bias"},
                   {T_UP, "gpt_neox.layers.{l}.mlp.dense_h_to_4h.weight"},
                   {T_UP_B, "gpt_neox.layers.{l}.mlp.dense_h_to_4h.bias"},
                   {T_DOWN, "gpt_neox.layers.{l}.mlp.dense_4h_to_h.weight"},
                   {T_DOWN_B, "gpt_neox.layers.{l}.mlp.dense_4h_to_h.bias"}},
                  {{T_POS_EMB, nullptr}}); // GGUF: GPT-2's names, without the learned positions
    f.neox.hf_conv1d = false;
    f.neox.hf[T_POS_EMB] = nullptr;
    f.neox.hf_qkv_per_head = true;
}

// Llama and the families made from its names: Gemma, Gemma 2, Phi-3 (fused q k v and gate | up), OLMo 2, Qwen3
void llama_rows(family_names& f) {
    f.llama = make("llama", nullptr, hf_llama, gguf_common);
    f.gemma = make("gemma", &f.llama, {}, {});
    // Gemma 2 norms both sides of each sublayer; HF's post_attention_layernorm is the attention output's
    // norm here, not (as in Llama) the MLP's input norm
    f.gemma2 = make("gemma2", &f.gemma,
                    {{T_ATTN_POST_NORM, "model.layers.{l}.post_attention_layernorm.weight"},
                     {T_FFN_NORM, "model.layers.{l}.pre_feedforward_layernorm.weight"},
                     {T_FFN_POST_NORM, "model.layers.{l}.post_feedforward_layernorm.weight"}},
                    {});
    f.phi3 = make("phi3", &f.gemma,
                  {{T_QKV, "model.layers.{l}.self_attn.qkv_proj.weight"},
                   {T_GATE_UP, "model.layers.{l}.mlp.gate_up_proj.weight"},
                   {T_Q, nullptr}, {T_K, nullptr}, {T_V, nullptr}, {T_GATE, nullptr}, {T_UP, nullptr}},
                  {{T_QKV, "blk.{l}.attn_qkv.weight"}, {T_GATE_UP, "blk.{l}.ffn_up.weight"},
                   {T_GATE, nullptr}, {T_UP, nullptr}});
    // OLMo 2: no norm before the sublayers, one after each (HF's post_attention_layernorm again differs)
    f.olmo2 = make("olmo2", &f.gemma,
                   {{T_ATTN_NORM, nullptr}, {T_FFN_NORM, nullptr},
                    {T_ATTN_POST_NORM, "model.layers.{l}.post_attention_layernorm.weight"},
                    {T_FFN_POST_NORM, "model.layers.{l}.post_feedforward_layernorm.weight"}},
                   {{T_ATTN_NORM, nullptr}, {T_FFN_NORM, nullptr}});
    f.qwen3 = make("qwen3", &f.gemma, {}, {});
}

// The MoE families, experts instead of the MLP: Mixtral's own HF names, and the ones Qwen2-MoE, Qwen3-MoE and
// OLMoE share; only Qwen2-MoE keeps a shared expert
void moe_rows(family_names& f) {
    f.mixtral = make("llama", &f.llama,
                     {{T_GATE, nullptr}, {T_UP, nullptr}, {T_DOWN, nullptr},
                      {T_ROUTER, "model.layers.{l}.block_sparse_moe.gate.weight"},
                      {T_EXP_GATE, "model.layers.{l}.block_sparse_moe.experts.{e}.w1.weight"},
                      {T_EXP_UP, "model.layers.{l}.block_sparse_moe.experts.{e}.w3.weight"},
                      {T_EXP_DOWN, "model.layers.{l}.block_sparse_moe.experts.{e}.w2.weight"}},
                     gguf_experts);
    f.qwen2_moe = make("qwen2moe", &f.gemma, hf_qwen_experts, gguf_experts);
    f.qwen3_moe = make("qwen3moe", &f.qwen2_moe, {}, {});
    f.olmoe = make("olmoe", &f.qwen2_moe, {}, {});
    for (tensor_names* t : {&f.mixtral, &f.qwen2_moe, &f.qwen3_moe, &f.olmoe})
        for (tensor_id id : {T_GATE, T_UP, T_DOWN}) t->hf[id] = t->gguf[id] = nullptr; // experts instead
    for (tensor_names* t : {&f.mixtral, &f.qwen3_moe, &f.olmoe})
        for (tensor_id id : {T_SH_GATE, T_SH_UP, T_SH_DOWN, T_SH_ROUTER}) t->hf[id] = t->gguf[id] = nullptr;
}

// The encoders (BERT, RoBERTa, DistilBERT): HF names only (the loader also finds them without the "bert." /
// "roberta." / "distilbert." prefix, as a bare BertModel saves them). The masked-LM head's transform LayerNorm is
// the final norm.
void encoder_rows(family_names& f) {
    f.bert = make("bert", nullptr,
                  {{T_HEAD_DENSE, "cls.predictions.transform.dense.weight"},
                   {T_HEAD_DENSE_B, "cls.predictions.transform.dense.bias"},
                   {T_NORM_F, "cls.predictions.transform.LayerNorm.weight"},
                   {T_NORM_F_B, "cls.predictions.transform.LayerNorm.bias"},
                   {T_LM_HEAD, "cls.predictions.decoder.weight"},
                   {T_LM_HEAD_B, "cls.predictions.bias"}},
                  {});
    add_bert_body(f.bert, "bert.");
    f.roberta = make("roberta", nullptr,
                     {{T_HEAD_DENSE, "lm_head.dense.weight"},
                      {T_HEAD_DENSE_B, "lm_head.dense.bias"},
                      {T_NORM_F, "lm_head.layer_norm.weight"},
                      {T_NORM_F_B, "lm_head.layer_norm.bias"},
                      {T_LM_HEAD, "lm_head.decoder.weight"},
                      {T_LM_HEAD_B, "lm_head.bias"}},
                     {});
    add_bert_body(f.roberta, "roberta.");
    f.distilbert = make("distilbert", nullptr,
                        {{T_TOK_EMB, "distilbert.embeddings.word_embeddings.weight"},
                         {T_POS_EMB, "distilbert.embeddings.position_embeddings.weight"},
                         {T_EMB_NORM, "distilbert.embeddings.LayerNorm.weight"},
                         {T_EMB_NORM_B, "distilbert.embeddings.LayerNorm.bias"},
                         {T_Q, "distilbert.transformer.layer.{l}.attention.q_lin.weight"},
                         {T_Q_B, "distilbert.transformer.layer.{l}.attention.q_lin.bias"},
                         {T_K, "distilbert.transformer.layer.{l}.attention.k_lin.weight"},
                         {T_K_B, "distilbert.transformer.layer.{l}.attention.k_lin.bias"},
                         {T_V, "distilbert.transformer.layer.{l}.attention.v_lin.weight"},
                         {T_V_B, "distilbert.transformer.layer.{l}.attention.v_lin.bias"},
                         {T_O, "distilbert.transformer.layer.{l}.attention.out_lin.weight"},
                         {T_O_B, "distilbert.transformer.layer.{l}.attention.out_lin.bias"},
                         {T_ATTN_NORM, "distilbert.transformer.layer.{l}.sa_layer_norm.weight"},
                         {T_ATTN_NORM_B, "distilbert.transformer.layer.{l}.sa_layer_norm.bias"},
                         {T_UP, "distilbert.transformer.layer.{l}.ffn.lin1.weight"},
                         {T_UP_B, "distilbert.transformer.layer.{l}.ffn.lin1.bias"},
                         {T_DOWN, "distilbert.transformer.layer.{l}.ffn.lin2.weight"},
                         {T_DOWN_B, "distilbert.transformer.layer.{l}.ffn.lin2.bias"},
                         {T_FFN_NORM, "distilbert.transformer.layer.{l}.output_layer_norm.weight"},
                         {T_FFN_NORM_B, "distilbert.transformer.layer.{l}.output_layer_norm.bias"},
                         {T_HEAD_DENSE, "vocab_transform.weight"},
                         {T_HEAD_DENSE_B, "vocab_transform.bias"},
                         {T_NORM_F, "vocab_layer_norm.weight"},
                         {T_NORM_F_B, "vocab_layer_norm.bias"},
                         {T_LM_HEAD, "vocab_projector.weight"},
                         {T_LM_HEAD_B, "vocab_projector.bias"}},
                        {});
}

// Image classifiers: ViTForImageClassification's classifier; DeiT with a teacher has two heads, the class head at
// [CLS] and the distillation head at [DIST] (DeiTForImageClassification's single head is "classifier.weight":
// load_weights looks for it when cls_classifier is absent)
void vision_rows(family_names& f) {
    f.vit = make("vit", nullptr, {{T_LM_HEAD, "classifier.weight"}, {T_LM_HEAD_B, "classifier.bias"}}, {});
    add_vit_body(f.vit, "vit.");
    f.deit = make("deit", nullptr,
                  {{T_DIST_TOK, "deit.embeddings.distillation_token"},
                   {T_LM_HEAD, "cls_classifier.weight"},
                   {T_LM_HEAD_B, "cls_classifier.bias"},
                   {T_DIST_HEAD, "distillation_classifier.weight"},
                   {T_DIST_HEAD_B, "distillation_classifier.bias"}},
                  {});
    add_vit_body(f.deit, "deit.");
}

// The encoder–decoders: BART, mBART and Marian, each as a decoder row and an encoder row
void seq2seq_rows(family_names& f) {
    f.bart = make("bart", nullptr, {}, {});
    add_seq2seq_body(f.bart, "decoder", false);
    f.bart_enc = make("bart", nullptr, {}, {});
    add_seq2seq_body(f.bart_enc, "encoder", false);
    f.mbart = make("mbart", nullptr, {}, {});
    add_seq2seq_body(f.mbart, "decoder", true);
    f.mbart_enc = make("mbart", nullptr, {}, {});
    add_seq2seq_body(f.mbart_enc, "encoder", true);
    f.marian = make("marian", &f.bart, {}, {}); // sinusoidal positions: no table, no embedding norm
    f.marian_enc = make("marian", &f.bart_enc, {}, {});
    for (tensor_names* t : {&f.marian, &f.marian_enc}) t->hf[T_POS_EMB] = t->hf[T_EMB_NORM] = t->hf[T_EMB_NORM_B] = nullptr;
}

// Every family's row, in groups; GPT-NeoX is made from GPT-2's names, the MoE rows from Llama's and Gemma's
family_names::family_names() {
    gpt_rows(*this);
    llama_rows(*this);
    moe_rows(*this);
    encoder_rows(*this);
    vision_rows(*this);
    seq2seq_rows(*this);
}

const family_names& families() {
    static const family_names f;
    return f;
}

} // namespace

const arch_info& arch_table(arch_id a) {
    const family_names& n = families();
    // name, kind, norm, mlp, positions, parallel, pre_norm, post_norm, qk_norm, gain_plus_one, embed_scale, names,
    // bidirectional, post_ln, mlm_head, cross, no_head
    static const arch_info table[ARCH_COUNT] = {
        {"gpt2", KIND_DECODER, NORM_LAYERNORM, MLP_GELU, POS_LEARNED, false, true, false, QK_NORM_NONE, false, false, &n.gpt2, false, false, false, false, false},
        {"llama", KIND_DECODER, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_NONE, false, false, &n.llama, false, false, false, false, false},
        {"gpt_neox", KIND_DECODER, NORM_LAYERNORM, MLP_GELU_ERF, POS_ROPE, true, true, false, QK_NORM_NONE, false, false, &n.neox, false, false, false, false, false},
        {"gemma", KIND_DECODER, NORM_RMSNORM, MLP_GEGLU, POS_ROPE, false, true, false, QK_NORM_NONE, true, true, &n.gemma, false, false, false, false, false},
        {"gemma2", KIND_DECODER, NORM_RMSNORM, MLP_GEGLU, POS_ROPE, false, true, true, QK_NORM_NONE, true, true, &n.gemma2, false, false, false, false, false},
        {"phi3", KIND_DECODER, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_NONE, false, false, &n.phi3, false, false, false, false, false},
        {"olmo2", KIND_DECODER, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, false, true, QK_NORM_FULL, false, false, &n.olmo2, false, false, false, false, false},
        {"qwen3", KIND_DECODER, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_HEAD, false, false, &n.qwen3, false, false, false, false, false},
        {"mixtral", KIND_MOE, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_NONE, false, false, &n.mixtral, false, false, false, false, false},
        {"qwen2_moe", KIND_MOE, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_NONE, false, false, &n.qwen2_moe, false, false, false, false, false},
        {"qwen3_moe", KIND_MOE, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_HEAD, false, false, &n.qwen3_moe, false, false, false, false, false},
        {"olmoe", KIND_MOE, NORM_RMSNORM, MLP_SWIGLU, POS_ROPE, false, true, false, QK_NORM_FULL, false, false, &n.olmoe, false, false, false, false, false},
        {"bert", KIND_ENCODER, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, false, false, QK_NORM_NONE, false, false, &n.bert, true, true, true, false, false},
        {"roberta", KIND_ENCODER, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, false, false, QK_NORM_NONE, false, false, &n.roberta, true, true, true, false, false},
        {"distilbert", KIND_ENCODER, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, false, false, QK_NORM_NONE, false, false, &n.distilbert, true, true, true, false, false},
        {"vit", KIND_VISION, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, true, false, QK_NORM_NONE, false, false, &n.vit, true, false, false, false, false},
        {"deit", KIND_VISION, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, true, false, QK_NORM_NONE, false, false, &n.deit, true, false, false, false, false},
        // encoder–decoders: the decoder rows (BART and Marian Post-LN, mBART Pre-LN with a final norm per stack),
        // then their encoder stacks (no causal mask, no head)
        {"bart", KIND_SEQ2SEQ, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, false, false, QK_NORM_NONE, false, false, &n.bart, false, true, false, true, false},
        {"mbart", KIND_SEQ2SEQ, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, true, false, QK_NORM_NONE, false, false, &n.mbart, false, false, false, true, false},
        {"marian", KIND_SEQ2SEQ, NORM_LAYERNORM, MLP_SILU, POS_SINUSOID, false, false, false, QK_NORM_NONE, false, false, &n.marian, false, true, false, true, false},
        {"bart encoder", KIND_SEQ2SEQ, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, false, false, QK_NORM_NONE, false, false, &n.bart_enc, true, true, false, false, true},
        {"mbart encoder", KIND_SEQ2SEQ, NORM_LAYERNORM, MLP_GELU_ERF, POS_LEARNED, false, true, false, QK_NORM_NONE, false, false, &n.mbart_enc, true, false, false, false, true},
        {"marian encoder", KIND_SEQ2SEQ, NORM_LAYERNORM, MLP_SILU, POS_SINUSOID, false, false, false, QK_NORM_NONE, false, false, &n.marian_enc, true, true, false, false, true},
    };
    if (a < 0 || a >= ARCH_COUNT) throw error("internal: unknown architecture id");
    return table[a];
}

arch_id encoder_arch(arch_id a) {
    switch (a) {
    case ARCH_BART: return ARCH_BART_ENCODER;
    case ARCH_MBART: return ARCH_MBART_ENCODER;
    case ARCH_MARIAN: return ARCH_MARIAN_ENCODER;
    default: return a;
    }
}

const char* tensor_id_name(tensor_id t) { return t >= 0 && t < T_COUNT ? id_names[t] : "?"; }

std::string tensor_name(const arch_info& a, bool gguf, tensor_id t, int l, int e) {
    const char* n = gguf ? a.names->gguf[t] : a.names->hf[t];
    if (!n) return "";
    std::string s = n;
    for (auto [key, v] : {std::pair{"{l}", l}, std::pair{"{e}", e}}) {
        size_t at = s.find(key);
        if (at != std::string::npos) s.replace(at, 3, std::to_string(v));
    }
    return s;
}

namespace {
struct type_map {
    const char* name;
    arch_id arch;
};
// config.json model_type -> family (Mistral and Qwen2 are Llama's table with their config's differences)
const type_map hf_types[] = {{"gpt2", ARCH_GPT2},           {"llama", ARCH_LLAMA},          {"mistral", ARCH_LLAMA},
                             {"qwen2", ARCH_LLAMA},         {"gpt_neox", ARCH_GPT_NEOX},    {"gemma", ARCH_GEMMA},
                             {"gemma2", ARCH_GEMMA2},       {"phi3", ARCH_PHI3},            {"olmo2", ARCH_OLMO2},
                             {"qwen3", ARCH_QWEN3},         {"mixtral", ARCH_MIXTRAL},      {"qwen2_moe", ARCH_QWEN2_MOE},
                             {"qwen3_moe", ARCH_QWEN3_MOE}, {"olmoe", ARCH_OLMOE},      {"bert", ARCH_BERT},
                             {"roberta", ARCH_ROBERTA},     {"distilbert", ARCH_DISTILBERT},
                             {"vit", ARCH_VIT},             {"deit", ARCH_DEIT},            {"bart", ARCH_BART},
                             {"mbart", ARCH_MBART},         {"marian", ARCH_MARIAN}};
const type_map gguf_archs[] = {{"gpt2", ARCH_GPT2},     {"llama", ARCH_LLAMA},         {"qwen2", ARCH_LLAMA},
                               {"gptneox", ARCH_GPT_NEOX}, {"gemma", ARCH_GEMMA},       {"gemma2", ARCH_GEMMA2},
                               {"phi3", ARCH_PHI3},     {"olmo2", ARCH_OLMO2},         {"qwen3", ARCH_QWEN3},
                               {"qwen2moe", ARCH_QWEN2_MOE}, {"qwen3moe", ARCH_QWEN3_MOE}, {"olmoe", ARCH_OLMOE}};
template <size_t N> std::string list(const type_map (&m)[N]) {
    std::string s;
    for (const type_map& t : m) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}
} // namespace

std::string supported_hf_types() { return list(hf_types); }

bool gguf_rope_adjacent(const std::string& gguf_arch) { return gguf_arch == "llama"; }
std::string supported_gguf_archs() { return list(gguf_archs); }

arch_id arch_from_hf(const std::string& model_type, const std::string& path) {
    for (const type_map& t : hf_types)
        if (model_type == t.name) return t.arch;
    throw error(path + ": unsupported model_type '" + model_type + "' (supported: " + supported_hf_types() + ")");
}

arch_id arch_from_gguf(const std::string& arch, bool has_experts, const std::string& path) {
    if (arch == "llama" && has_experts) return ARCH_MIXTRAL; // llama.cpp writes Mixtral as llama with experts
    for (const type_map& t : gguf_archs)
        if (arch == t.name) return t.arch;
    throw error(path + ": architecture '" + arch + "' is not supported (supported: " + supported_gguf_archs() + ")");
}

} // namespace gb
