import { z } from "zod";
import { multiline } from "../validation/text.js";
import { Application } from "./applications.js";
import { SLUG_PATTERN, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";
import { Database } from "./databases.js";

/** Names that would collide with fixed sub-paths of /projects/{uuid}/... */
export const RESERVED_ENVIRONMENT_NAMES = ["environments"] as const;
const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export const EnvironmentName = z
  .string()
  .min(1)
  .max(63)
  .regex(SLUG_PATTERN, "Use lowercase letters, digits and hyphens (no leading, trailing or double hyphens).")
  .refine((n) => !(RESERVED_ENVIRONMENT_NAMES as readonly string[]).includes(n), "This name is reserved.")
  // Environments are addressed by name or uuid in one path segment: a name shaped like a uuid
  // could shadow another environment's uuid.
  .refine((n) => !UUID_SHAPE.test(n), "A name shaped like a uuid is not allowed.");

export const Environment = z
  .object({ id: z.number().int(), uuid: z.string(), name: z.string(), created_at: Timestamp })
  .meta({ id: "Environment" });
export type Environment = z.infer<typeof Environment>;

export const EnvironmentDetail = Environment.extend({
  project_uuid: z.string(),
  project_name: z.string(),
  /** Spec 4.2: the environment "with all resources"; services join when they are built. */
  applications: z.array(Application).meta({ description: "The environment's applications, by id" }),
  databases: z.array(Database).meta({ description: "The environment's standalone databases, by id (the items of GET /databases)" }),
}).meta({ id: "EnvironmentDetail" });
export type EnvironmentDetail = z.infer<typeof EnvironmentDetail>;

export const Project = z
  .object({
    uuid: z.string(),
    name: z.string(),
    description: z.string(),
    environments: z.array(Environment),
    created_at: Timestamp,
  })
  .meta({ id: "Project" });
export type Project = z.infer<typeof Project>;

export const ProjectList = listOf(Project);

/** How many resources an environment, or a whole project, holds (spec 4.2 "resource counts"). */
export const ResourceCounts = z
  .object({
    applications: z.number().int(),
    databases: z.number().int(),
    services: z.number().int().meta({ description: "0 until services exist on this instance" }),
    total: z.number().int(),
  })
  .meta({ id: "ResourceCounts" });
export type ResourceCounts = z.infer<typeof ResourceCounts>;

/** GET /projects/{uuid}: the project with its environments and resource counts (the list items carry none). */
export const ProjectDetail = Project.extend({
  environments: z.array(Environment.extend({ resource_counts: ResourceCounts }).meta({ id: "EnvironmentWithCounts" })),
  /** Sums over the environments shown (a member sees only the environments its grants reach). */
  resource_counts: ResourceCounts,
}).meta({ id: "ProjectDetail" });
export type ProjectDetail = z.infer<typeof ProjectDetail>;

export const ProjectName = z.string().trim().min(1).max(255);
export const ProjectDescription = multiline(z.string().max(2000));

export const CreateProjectBody = requestBody({
  name: ProjectName,
  description: ProjectDescription.optional(),
});
export const UpdateProjectBody = requestBody({ name: ProjectName.optional(), description: ProjectDescription.optional() }).refine(
  (b) => b.name !== undefined || b.description !== undefined,
  { message: "Provide name or description.", path: ["name"] },
);

export const CreatedProject = z
  .object({
    uuid: z.string(),
    name: z.string(),
    description: z.string(),
    environments: z.array(z.object({ id: z.number().int(), name: z.string() })),
  })
  .meta({ id: "CreatedProject" });

export const ProjectParams = z.object({ uuid: resourceId("project", Uuid) });
export const EnvironmentParams = z.object({
  uuid: resourceId("project", Uuid),
  environment_name_or_uuid: resourceId("environment", z.string().min(1).max(64)),
});
export const CreateEnvironmentBody = requestBody({ name: EnvironmentName });
export const EnvironmentList = listOf(Environment);
