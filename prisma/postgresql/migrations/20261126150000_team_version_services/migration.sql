-- Hand-written (see the SQLite twin): services count in GET /projects/{uuid} (issue 17), served
-- from the response cache, so creating, deleting or moving a service bumps its team's version,
-- with the function of 20261126060000_team_version_resources.

CREATE TRIGGER "TeamVersion_service" BEFORE INSERT OR DELETE ON "Service"
    FOR EACH ROW EXECUTE FUNCTION "TeamVersion_team_row"();
CREATE TRIGGER "TeamVersion_service_move" BEFORE UPDATE OF "environmentId", "teamId" ON "Service"
    FOR EACH ROW WHEN (OLD."environmentId" IS DISTINCT FROM NEW."environmentId" OR OLD."teamId" IS DISTINCT FROM NEW."teamId")
    EXECUTE FUNCTION "TeamVersion_team_row"();
