// A self-test for users who bring GPT-2 small: does the loaded model reproduce facts published about it? A
// check of the whole path (loader, tokenizer, forward, head scores), on the user's own files.
#pragma once
#include <string>
#include <vector>

#include "model/model.h"

namespace gb {

struct selftest_fact {
    std::string name;     // "loss on \"Hello world!\" with BOS"
    std::string expected; // "5.3319 (within 0.01)"
    std::string got;      // "5.3320", or what came instead
    bool matched = false;
};
struct selftest_result {
    std::vector<selftest_fact> facts;
    int matched() const;
};

// Throws gb::error when m is not GPT-2 small's shape (GPT-2 family, 12 layers, 12 heads, d_model 768,
// vocabulary 50257): the facts are about that model. Otherwise checks, each reported matched or not:
//   - the mean next-token cross-entropy on "Hello world!" after BOS is 5.3319 nats (within 0.01);
//   - L4H11 is the top previous-token head (head scores on 50 random tokens repeated, seed 0, after BOS);
//   - L5H5 is among the five top induction heads (the same run);
//   - " Paris" is the top prediction after "The Eiffel Tower is in the city of".
selftest_result gpt2_selftest(const model& m);

} // namespace gb
