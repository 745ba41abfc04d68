// parse_ops_shape (train/calibrate_ops.h): the --ops-shape values of prophet profile --calibrate.
#include <gtest/gtest.h>

#include "core/error.h"
#include "train/calibrate_ops.h"

using namespace prophet;

TEST(OpsShape, OverridesTheGivenKeysOfTheBaseModel) {
    ModelConfig base;
    base.V = 256, base.T = 32, base.C = 64, base.NH = 4, base.L = 2, base.E = 4, base.K = 1, base.F = 2048, base.B = 16;
    const ModelConfig m = parse_ops_shape("C=128,F=1024,NH=8", base);
    EXPECT_EQ(m.C, 128);
    EXPECT_EQ(m.F, 1024);
    EXPECT_EQ(m.NH, 8);
    EXPECT_EQ(m.V, 256);  // not given: the base's
    EXPECT_EQ(m.E, 4);
    EXPECT_EQ(m.T, 32);
    EXPECT_EQ(m.B, 16);
    EXPECT_EQ(parse_ops_shape("V=512", base).V, 512);
}

TEST(OpsShape, RejectsMalformedShapesNamingTheOption) {
    const ModelConfig base;
    for (const char* bad : {"", "C", "C=", "C=0", "C=-4", "C=12x", "X=3", "C=128,", "L=2"}) {
        try {
            parse_ops_shape(bad, base);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("--ops-shape"), std::string::npos) << e.what();
        }
    }
}

TEST(OpsShape, RejectsAnInvalidModelNamingTheField) {
    const ModelConfig base;
    // C % NH != 0: the model's own validation names the field
    try {
        parse_ops_shape("C=100,NH=8", base);
        ADD_FAILURE() << "accepted C=100 with 8 heads";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("model."), std::string::npos) << e.what();
    }
}
