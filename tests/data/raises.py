import torch


def make_inputs():
    return (torch.ones(3),)


# trainium: profile inputs=make_inputs
def fails(x):
    y = x * 2
    return y.view(7, 7)  # RAISES-HERE


# trainium: profile
def needs_args(x, y):
    return x + y


# trainium: profile inputs=missing_function
def names_nothing(x):
    return x


def returns_list():
    return [torch.ones(2)]


# trainium: profile inputs=returns_list
def wrong_inputs(x):
    return x


def explodes():
    raise RuntimeError("no data")  # INPUTS-RAISES


# trainium: profile inputs=explodes
def inputs_raise(x):
    return x


# trainium: profile colour=blue
def bad_option():
    return torch.ones(2)
