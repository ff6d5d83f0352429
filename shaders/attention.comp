#version 430
// Attention for one layer, all heads (or a slice of them, see h0) in one dispatch: causal, optionally within a
// sliding window, or non-causal (causal == 0: encoders, every query over every key); scores optionally soft-capped.
// CPU twin: attention_cpu() in core/attention.cpp.
//
// Workgroup (query block, head): BQ queries of one head, NT = 128 invocations, TPQ = NT / BQ of them per query.
// Keys go through shared memory in tiles of BK rows: each K tile and then each V tile is staged cooperatively
// (coalesced reads) and reused by all BQ queries of the block. Per query an online softmax keeps the running
// max m and running sum l and rescales the partial output by exp(m_old - m_new) when the max grows.
// Raw scores are written to the probability buffer while the tiles stream by; at the end each invocation
// normalises exactly the entries it wrote itself (same key residue mod TPQ), so no cross-invocation memory
// barrier is needed, and writes 0 above the diagonal (causal only) and before the window.
// Non-causal: each query's last key is the last of all, so every workgroup runs over every key tile; the host
// (gl_attention.cpp) rejects a window with it, as attention_cpu does.
//
// BQ, BK and MAX_D are #defined by the host (gl_attention.cpp, tile_configs) right after #version; shared memory
// is 4 * (BQ*MAX_D + BK*(MAX_D+1) + BQ*(BK+1) + 3*BQ) bytes (27,008 for 16/32/128, under the 32 KB minimum).
// Indices are int32: the host checks every buffer (and each pass's probabilities) against
// GL_MAX_SHADER_STORAGE_BLOCK_SIZE, which is a GLint, so every element index is below 2^29.
#ifndef BQ
#define BQ 16
#endif
#ifndef BK
#define BK 32
#endif
#ifndef MAX_D
#define MAX_D 128
#endif
#define NT 128
#define TPQ (NT / BQ)      // invocations per query
#define SPT (BK / TPQ)     // scores per invocation per tile
#define OPT (MAX_D / TPQ)  // output elements per invocation
#define KS (MAX_D + 1)     // K/V tile row stride: odd, so neighbouring rows fall in different banks
#define SS (BK + 1)        // score tile row stride
#define NEG_BIG -3.402823e38

layout(local_size_x = NT) in;

layout(std430, binding = 0) readonly buffer Qbuf { float q[]; };     // [n_q][q_stride], head h at h*d_head
layout(std430, binding = 1) readonly buffer Kbuf { float k[]; };     // [n_kv][kv_stride], kv head g at g*d_head
layout(std430, binding = 2) readonly buffer Vbuf { float v[]; };     // [n_kv][kv_stride]
layout(std430, binding = 3) buffer Pbuf { float probs[]; };          // [heads of this pass][n_q][n_kv]
layout(std430, binding = 4) writeonly buffer Obuf { float outv[]; }; // [n_q][out_stride], head h at h*d_head

uniform int n_q;         // queries are positions n_past .. n_past+n_q-1
uniform int n_past;      // keys are positions 0 .. n_past+n_q-1
uniform int n_head;
uniform int n_kv_head;
uniform int d_head;      // <= MAX_D
uniform int q_stride;
uniform int kv_stride;
uniform int out_stride;
uniform int h0;          // first head of this dispatch (workgroup y is the head within it)
uniform int write_probs; // 0: the caller keeps no probabilities
uniform float scale;     // 1/sqrt(d_head), or the model's (Gemma 2)
uniform float softcap;   // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
uniform int window;      // > 0: query i sees keys j with i - j < window (sliding window)
uniform int causal;      // 1: query i sees keys j <= n_past + i; 0: all keys 0 .. n_past+n_q-1 (window is 0)

shared float q_s[BQ * MAX_D]; // the block's queries [BQ][d_head] (row stride MAX_D)
shared float kv_s[BK * KS];   // K tile, then V tile [BK][d_head] (row stride KS)
shared float p_s[BQ * SS];    // scores of the tile, then exp(score - running max) [BQ][BK]
shared float m_s[BQ];         // running max per query
shared float l_s[BQ];         // running sum per query
shared float a_s[BQ];         // this tile's rescale factor exp(m_old - m_new) per query

void main() {
    const int hp = int(gl_WorkGroupID.y); // head within this pass: the probability rows are per pass
    const int h = h0 + hp;
    const int g = h / (n_head / n_kv_head); // grouped-query: the kv head this query head reads
    const int i0 = int(gl_WorkGroupID.x) * BQ;
    const int t = int(gl_LocalInvocationID.x);
    const int qi = t / TPQ;   // this invocation's query within the block
    const int lane = t % TPQ; // its place among the query's invocations
    const int i = i0 + qi;
    const bool live = i < n_q;
    const int n_kv = n_past + n_q;
    const int last = causal != 0 ? n_past + i : n_kv - 1; // causal: keys after the query's own position are masked
    const int first = window > 0 ? max(0, n_past + i - window + 1) : 0; // and those before its window
    // last key any query of the block sees: the tiles past it are skipped (causal), none are (non-causal)
    const int block_last = causal != 0 ? n_past + min(i0 + BQ, n_q) - 1 : n_kv - 1;
    const int prow = live ? (hp * n_q + i) * n_kv : 0;

    for (int e = t; e < BQ * d_head; e += NT) {
        const int r = e / d_head, d = e - r * d_head;
        q_s[r * MAX_D + d] = i0 + r < n_q ? q[(i0 + r) * q_stride + h * d_head + d] : 0.0;
    }
    if (t < BQ) {
        m_s[t] = NEG_BIG;
        l_s[t] = 0.0;
    }
    float acc[OPT]; // unnormalised output for dims lane, lane+TPQ, ... of query qi
    for (int c = 0; c < OPT; c++) acc[c] = 0.0;
    barrier();

    // tiles before the block's first query's window hold nothing it sees (uniform over the workgroup)
    const int block_first = window > 0 ? max(0, n_past + i0 - window + 1) / BK * BK : 0;
    for (int j0 = block_first; j0 <= block_last; j0 += BK) { // block_last is uniform over the workgroup
        const int nk = min(BK, block_last - j0 + 1);
        for (int e = t; e < nk * d_head; e += NT) {
            const int r = e / d_head, d = e - r * d_head;
            kv_s[r * KS + d] = k[(j0 + r) * kv_stride + g * d_head + d];
        }
        barrier();

        // scores: this invocation takes keys lane, lane+TPQ, ... of the tile
        for (int c = 0; c < SPT; c++) {
            const int jj = lane + c * TPQ;
            const int j = j0 + jj;
            float s = NEG_BIG;
            if (live && j <= last && j >= first) { // j <= last implies jj < nk
                float dot = 0.0;
                for (int d = 0; d < d_head; d++) dot += q_s[qi * MAX_D + d] * kv_s[jj * KS + d];
                s = dot * scale;
                if (softcap > 0.0) s = softcap * tanh(s / softcap);
                if (write_probs != 0) probs[prow + j] = s;
            }
            p_s[qi * SS + jj] = s;
        }
        barrier();

        // online softmax, one invocation per query row, while the others stage the V tile over the K tile
        if (t < BQ) {
            // keys of row t visible in this tile: [lo, hi)
            const int row_last = causal != 0 ? n_past + i0 + t : n_kv - 1;
            const int row_first = window > 0 ? max(0, n_past + i0 + t - window + 1) : 0;
            const int hi = i0 + t < n_q ? clamp(row_last - j0 + 1, 0, nk) : 0;
            const int lo = clamp(row_first - j0, 0, hi);
            const float m_old = m_s[t];
            float m_new = m_old;
            for (int jj = lo; jj < hi; jj++) m_new = max(m_new, p_s[t * SS + jj]);
            float sum = 0.0;
            for (int jj = 0; jj < BK; jj++) {
                const float e = jj >= lo && jj < hi ? exp(p_s[t * SS + jj] - m_new) : 0.0; // subtract the max for stability
                p_s[t * SS + jj] = e;
                sum += e;
            }
            const float alpha = exp(m_old - m_new); // 0 on the first tile, 1 when the max did not grow
            l_s[t] = l_s[t] * alpha + sum;
            m_s[t] = m_new;
            a_s[t] = alpha;
        }
        for (int e = t; e < nk * d_head; e += NT) {
            const int r = e / d_head, d = e - r * d_head;
            kv_s[r * KS + d] = v[(j0 + r) * kv_stride + g * d_head + d];
        }
        barrier();

        // P·V: this invocation owns dims lane, lane+TPQ, ... of query qi
        const float alpha = a_s[qi];
        for (int c = 0; c < OPT; c++) acc[c] *= alpha;
        for (int jj = 0; jj < nk; jj++) {
            const float p = p_s[qi * SS + jj];
            for (int c = 0; c < OPT; c++) {
                const int d = lane + c * TPQ;
                if (d < d_head) acc[c] += p * kv_s[jj * KS + d];
            }
        }
        barrier(); // the next tile overwrites kv_s and p_s
    }

    if (!live) return;
    const float m = m_s[qi];
    const float inv = 1.0 / l_s[qi];
    for (int c = 0; c < OPT; c++) {
        const int d = lane + c * TPQ;
        if (d < d_head) outv[i * out_stride + h * d_head + d] = acc[c] * inv;
    }
    if (write_probs != 0)
        for (int j = lane; j < n_kv; j += TPQ) probs[prow + j] = j <= last && j >= first ? exp(probs[prow + j] - m) * inv : 0.0;
}
