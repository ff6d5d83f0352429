#version 430
// Causal attention for one layer, all heads in one dispatch: workgroup (query i, head h).
// Keys are processed in tiles of 64 through shared memory with an online softmax (running max m and
// running sum l, rescaling the partial output when the max grows). Raw scores go to the probability buffer
// first and are normalised in place at the end, so the CPU gets both the pattern and the head output.
// CPU twin: attention_cpu() in core/forward.cpp.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Qbuf { float q[]; };     // [n_q][q_stride]
layout(std430, binding = 1) readonly buffer Kbuf { float k[]; };     // [n_kv][kv_stride]
layout(std430, binding = 2) readonly buffer Vbuf { float v[]; };     // [n_kv][kv_stride]
layout(std430, binding = 3) buffer Pbuf { float probs[]; };          // [H][n_q][n_kv]
layout(std430, binding = 4) writeonly buffer Obuf { float outv[]; }; // [n_q][out_stride]

uniform int n_q;
uniform int n_past;
uniform int n_head;
uniform int n_kv_head;
uniform int d_head;
uniform int q_stride;
uniform int kv_stride;
uniform int out_stride;
uniform float scale;

const int TILE = 64;
const int MAX_D = 256;

shared float q_s[MAX_D];
shared float o_s[MAX_D];
shared float e_s[TILE];   // exp(score - running max) of the tile
shared float red[TILE];   // reductions

void main() {
    const int i = int(gl_WorkGroupID.x);
    const int h = int(gl_WorkGroupID.y);
    const int t = int(gl_LocalInvocationID.x);
    const int g = h / (n_head / n_kv_head); // grouped-query: the kv head this query head reads
    const int n_kv = n_past + n_q;
    const int last = n_past + i;            // keys after the query's own position are masked
    const int prow = (h * n_q + i) * n_kv;

    for (int d = t; d < d_head; d += TILE) {
        q_s[d] = q[i * q_stride + h * d_head + d];
        o_s[d] = 0.0;
    }
    float m = -3.4e38; // running max (every thread keeps the same copy)
    float l = 0.0;        // running sum
    barrier();

    for (int j0 = 0; j0 <= last; j0 += TILE) {
        const int j = j0 + t;
        float s = -3.4e38;
        if (j <= last) {
            float dot = 0.0;
            for (int d = 0; d < d_head; d++) dot += q_s[d] * k[j * kv_stride + g * d_head + d];
            s = dot * scale;
            probs[prow + j] = s;
        }
        red[t] = s;
        barrier();
        for (int w = TILE / 2; w > 0; w /= 2) { // tile max
            if (t < w) red[t] = max(red[t], red[t + w]);
            barrier();
        }
        const float m_new = max(m, red[0]);
        const float alpha = exp(m - m_new); // rescales what was accumulated under the old max
        barrier();
        const float e = j <= last ? exp(s - m_new) : 0.0;
        e_s[t] = e;
        red[t] = e;
        barrier();
        for (int w = TILE / 2; w > 0; w /= 2) { // tile sum
            if (t < w) red[t] += red[t + w];
            barrier();
        }
        l = l * alpha + red[0];
        m = m_new;
        const int n_tile = min(TILE, last - j0 + 1);
        for (int d = t; d < d_head; d += TILE) {
            float acc = o_s[d] * alpha;
            for (int jj = 0; jj < n_tile; jj++) acc += e_s[jj] * v[(j0 + jj) * kv_stride + g * d_head + d];
            o_s[d] = acc;
        }
        barrier();
    }

    const float inv = 1.0 / l;
    for (int j = t; j < n_kv; j += TILE) probs[prow + j] = j <= last ? exp(probs[prow + j] - m) * inv : 0.0;
    for (int d = t; d < d_head; d += TILE) outv[i * out_stride + h * d_head + d] = o_s[d] * inv;
}
