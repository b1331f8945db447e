-- hfu_canon_name(name): the key that matches a Nsight Compute launch to Nsight Systems kernels.
-- Purpose: ncu and nsys demangle the same kernel slightly differently (`(int)4` vs `4`,
--   `(anonymous namespace)` vs `<unnamed>`, spacing), so both sides are compared on this key.
-- Returns: VARCHAR, the demangled name with C-style integer/bool casts, the anonymous-namespace
--   spelling and all whitespace removed.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO hfu_canon_name(name) AS
    regexp_replace(
        regexp_replace(
            replace(name, '(anonymous namespace)', '<unnamed>'),
            '\((unsigned |signed )?(int|long|long long|short|char|bool|unsigned|__int128)\)', '', 'g'),
        '\s+', '', 'g');
