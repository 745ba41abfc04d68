// model_config.cpp: validation of ModelConfig with messages that name the key, the value and the fix.
#include "model/model_config.h"

#include <string>

#include "core/error.h"

namespace prophet {

namespace {

void require_positive(const char* key, int value) {
    if (value <= 0) throw_config_error(key, std::to_string(value), "must be a positive integer", "");
}

}  // namespace

void model_config_validate(const ModelConfig& config) {
    require_positive("model.V", config.V);
    require_positive("model.T", config.T);
    require_positive("model.C", config.C);
    require_positive("model.NH", config.NH);
    require_positive("model.L", config.L);
    require_positive("model.E", config.E);
    require_positive("model.K", config.K);
    require_positive("model.B", config.B);
    if (config.C % config.NH != 0) {
        throw_config_error("model.NH", std::to_string(config.NH),
                           "must divide model.C = " + std::to_string(config.C), "pick NH with C % NH == 0");
    }
    if (config.K > config.E) {
        throw_config_error("model.K", std::to_string(config.K), "must be <= model.E = " + std::to_string(config.E),
                           "lower K or raise E");
    }
    if (config.F < 0) throw_config_error("model.F", std::to_string(config.F), "must be >= 0 (0 means 2*C)", "");
    if (config.aux_loss_coef < 0.0) {
        throw_config_error("model.aux_loss_coef", std::to_string(config.aux_loss_coef), "must be >= 0", "");
    }
    if (config.capacity_factor < 0.0) {
        throw_config_error("model.capacity_factor", std::to_string(config.capacity_factor),
                           "must be >= 0 (0 means dropless)", "");
    }
}

}  // namespace prophet
