"""Legacy-format upgrades, all in one place (placeholder: only the hooks; see issue 2)."""


def upgrade_net(net, filename="<net>"):
    return net


def upgrade_solver(solver, filename="<solver>"):
    return solver
