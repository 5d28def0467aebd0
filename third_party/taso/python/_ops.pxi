# The operator table and the enum names of taso/ops.h as plain Python data,
# included into _engine.pyx. xflowrl/engine/ops.py is their only reader; every
# other module takes operator facts from there.


def op_table():
    """One dict per operator type, in the table's order (ops_table.cc's kOpTypes):
    type_id, name, arity (-1: variadic), num_outputs (-1: set by the
    parameters), params (tuple of OpParams field names), free, weight_only,
    pattern, kind (an OpKind value: `op_kind_table`), flops_per_element and
    activation (an Activation value) (see OpTypeInfo in taso/ops.h)."""
    cdef vector[OpTypeInfo] table = op_type_table()
    return [dict(type_id=t.type, name=t.name.decode(), arity=t.num_inputs,
                 num_outputs=t.num_outputs, params=tuple(t.params.decode().split()),
                 free=t.free, weight_only=t.weight_only, pattern=t.pattern,
                 kind=t.kind, flops_per_element=t.flops_per_element,
                 activation=t.activation)
            for t in table]


cdef list _enum_names(vector[EnumName] names):
    return [(e.value, e.name.decode()) for e in names]


def activation_table():
    """(value, name) of every Activation, in value order."""
    return _enum_names(activation_names())


def padding_table():
    """(value, name) of every Padding, in value order."""
    return _enum_names(padding_names())


def op_kind_table():
    """(value, name) of every OpKind, in value order."""
    return _enum_names(op_kind_names())


def rule_param_table():
    """(key, name, is_float) of every ParamKey a rule file may name."""
    cdef vector[ParamKeyInfo] keys = rule_param_keys()
    return [(k.key, k.name.decode(), k.is_float) for k in keys]


def window(int64_t size, int64_t kernel, int stride, int padding):
    """(out, pad_before, pad_after) of one spatial dimension: taso::conv_window,
    the engine's one SAME/VALID rule. ValueError for a stride below 1, an
    unknown padding or a VALID kernel larger than the input."""
    cdef Window w = conv_window(size, kernel, stride, padding)
    return w.out, w.pad_before, w.pad_after
