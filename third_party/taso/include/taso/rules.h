// Substitution rules ("xfers") and everything the engine does with them, in
// one include: the rules themselves (pattern.h), matching a source pattern
// on a graph (match.h), the rewrite candidates a match produces, their
// incremental hashes and their graphs (candidate.h), pricing candidates
// without building them (coster.h), and the locations of a rule set on one
// graph (locations.h). Each header states what it offers and whether it is
// thread-safe.
#ifndef TASO_RULES_H_
#define TASO_RULES_H_

#include "taso/candidate.h"
#include "taso/coster.h"
#include "taso/locations.h"
#include "taso/match.h"
#include "taso/pattern.h"

#endif  // TASO_RULES_H_
